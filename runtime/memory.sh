# -- preflight: the engine's start check of free memory -------------------------------------------------
# On unified memory (a Spark: one GPU whose memory is the node's RAM) vLLM refuses to start unless
# SPARKC_START_GATE_PPM millionths of the node's total memory are available once its own init has taken
# SPARKC_START_GATE_OVERHEAD_KB (the compiler's engine module says why and how much). The node's /proc/meminfo,
# gathered by check_memory, tells whether that holds now: if not, the launch stops here, with the largest
# fraction that would start and what frees memory, instead of after the containers started.

# KiB as GiB with one decimal (rounded down), as vLLM prints its own numbers.
kib_gib() { printf '%d.%d' $(($1 / 1048576)) $(($1 % 1048576 * 10 / 1048576)); }

# A field of the node's /proc/meminfo, in KiB ("" when absent).
meminfo_kb() { pf "$1" memory | awk -v key="$2:" '$1 == key { print $2; exit }'; }

# What this deployment's own container holds on the node, in KiB: it runs there now and this launch
# replaces it, so that memory comes back before the engine starts.
own_budget_kb() {
  local node=$1 words=() word
  [[ $(pf_first "$node" container) == "running $SPARKC_DEPLOYMENT "* ]] || { echo 0; return 0; }
  compiled_run SPARKC_DOCKER_RUN "$node" words
  for word in "${words[@]}"; do
    [[ $word == sparkc.memory-budget=* ]] && { echo $((${word#*=} / 1024)); return 0; }
  done
  echo 0
}

# The other sparkc deployments running on the node, as "NAME, NAME".
running_beside() {
  local node=$1 id state name names=()
  while read -r id state name _; do
    [[ -n $id && $state == running && $name != "$SPARKC_DEPLOYMENT" ]] && names+=("$(safe_word "$name")")
  done <<<"$(pf "$node" sparkc_container)"
  local IFS=','
  printf '%s' "${names[*]}" | sed 's/,/, /g'
}

judge_start_gate() {
  local node=$1 total available cached need have largest beside fixes=()
  ((SPARKC_START_GATE_PPM > 0 && SPARKC_GPUS[$node] == 1)) || return 0
  total=$(meminfo_kb "$node" MemTotal)
  available=$(meminfo_kb "$node" MemAvailable)
  if ! [[ $total =~ ^[0-9]+$ && $available =~ ^[0-9]+$ ]] || ((total == 0)); then
    pf_warn "$node" "/proc/meminfo gave no MemTotal and MemAvailable: $SPARKC_START_GATE_ENGINE's start check of free" \
      "memory was not checked"
    return 0
  fi
  available=$((available + $(own_budget_kb "$node")))
  need=$(((total * SPARKC_START_GATE_PPM + 999999) / 1000000))
  have=$((available - SPARKC_START_GATE_OVERHEAD_KB))
  ((have >= need)) && return 0
  largest=0
  ((have > 0)) && largest=$((have * 100 / total))
  if ((largest > 0)); then
    fixes+=("set engine.gpu_memory_utilization to at most $(printf '0.%02d' "$largest") (the largest fraction that" \
      "starts there now) and compile again")
  fi
  beside=$(running_beside "$node")
  [[ -z $beside ]] || fixes+=("stop a deployment that runs beside it ($beside: its stop-cluster.sh)")
  cached=$(meminfo_kb "$node" Cached)
  if [[ $cached =~ ^[0-9]+$ ]] && ((cached > 1048576 && !SPARKC_DROP_PAGE_CACHE)); then
    fixes+=("drop the $(kib_gib "$cached") GiB of page cache (launch.drop_page_cache: true)")
  fi
  fixes+=("stop other programs that hold memory there (free -g; top -o RES)")
  local fix
  fix=$(printf '%s; or ' "${fixes[@]}")
  pf_problem "$node" "$node has $(kib_gib "$available") of $(kib_gib "$total") GiB of memory available, and" \
    "$SPARKC_START_GATE_ENGINE would refuse to start: it needs $SPARKC_START_GATE_SOURCE $SPARKC_START_GATE_FRACTION x $(kib_gib "$total")" \
    "= $(kib_gib "$need") GiB free after its own init takes about $(kib_gib "$SPARKC_START_GATE_OVERHEAD_KB") GiB, which" \
    "leaves $(kib_gib $((have > 0 ? have : 0))) GiB. Fix: ${fix%; or }"
  pf_note "$node" memory "$(kib_gib "$available")G avail < $SPARKC_START_GATE_FRACTION"
}
