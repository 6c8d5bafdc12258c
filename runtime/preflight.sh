# -- phase 1: preflight ------------------------------------------------------------------------
# One ssh round trip per node, every node at once: a POSIX sh script (nodes may log in with bash,
# dash, zsh or busybox sh; it runs under sh -c) gathers what each check needs and prints it as lines
# "KEY VALUE"; the launcher then judges each node, in node order, and compares the nodes.
# To add a check: a remote function check_NAME (reads its inputs as $a_KEY, prints KEY lines), its
# name in SPARKC_PREFLIGHT_CHECKS, its inputs in preflight_args, and a judge_NAME function here that reads
# the lines with pf and reports through pf_problem / pf_warn / pf_note.

# shellcheck disable=SC2016  # the script is expanded by sh on the node, not here
# sparkc-embed SPARKC_PREFLIGHT_REMOTE_LIB node/preflight.sh
# Checks of optional spec features (planes.sh) add their remote functions here and their names below.
SPARKC_PREFLIGHT_EXTRA_LIB=''
# The remote checks, in the order they run.
SPARKC_PREFLIGHT_CHECKS=(host docker model weights draft mounts fabric hcas gpus memory sparkc)
# What a node's judgement reads, in order; each judge reports and goes on, so all problems are seen.
SPARKC_PREFLIGHT_JUDGES=(fabric docker image model draft mounts hcas gpus memory start_gate beside)

# SPARKC_PF_ARGS: the remote script's inputs for a node, as key=value words (quoted by on_node).
preflight_args() {
  local node=$1 hca hcas=()
  for hca in ${SPARKC_HCAS[$node]}; do
    hca=${hca#=}
    [[ $hca == *:* ]] || hca+=:1
    hcas+=("$hca")
  done
  SPARKC_PF_ARGS=(
    "image=$SPARKC_IMAGE"
    "container=${SPARKC_CONTAINER[$node]}"
    "model=$SPARKC_MODEL_HOST_PATH"
    "netdev=${SPARKC_NETDEV[$node]}"
    "hcas=${hcas[*]}"
    "weights=$SPARKC_MODEL_FOLDER"
    "revision=$SPARKC_MODEL_REVISION"
    "hf=$SPARKC_MODEL_HF"
    "draft=$SPARKC_DRAFT_FOLDER"
    # One path a line: no value of a spec holds a line break (the compiler refuses control characters).
    "mounts=$(printf '%s\n' "${SPARKC_MOUNT_SOURCES[@]}")"
  )
  if ((SPARKC_HAS_PLANES)); then planes_preflight_args "$node"; fi
  if ((SPARKC_IS_RING)); then ring_preflight_args "$node"; fi
  if ((SPARKC_HAS_FABRIC_ADDRESSES)); then addresses_preflight_args "$node"; fi
}

preflight_script() {
  local check
  printf 'container_format=%s\n' "$(sh_quote "$SPARKC_OLD_CONTAINER_FORMAT")"
  printf '%s\n' "$SPARKC_PREFLIGHT_REMOTE_LIB" "$SPARKC_PREFLIGHT_EXTRA_LIB"
  # The weights' revision and dangling links (model.sh), each line marked "weights".
  # shellcheck disable=SC2016  # for the node's sh
  printf 'check_weights() {\n  (\n    set -- "$a_weights" "$a_revision" "$a_hf"\n%s\n  ) | sed "s/^/weights /"\n}\n' \
    "$SPARKC_MODEL_FACTS_SH"
  # The draft model's folder: "draft_dir yes" or "draft_dir no", and its dangling links, marked "draft".
  # shellcheck disable=SC2016  # for the node's sh
  printf 'check_draft() {\n  [ -n "$a_draft" ] || return 0\n  [ -d "$a_draft" ] || { echo "draft_dir no"; return 0; }
  echo "draft_dir yes"\n  (\n    set -- "$a_draft" "" ""\n%s\n  ) | sed "s/^/draft /"\n}\n' "$SPARKC_MODEL_FACTS_SH"
  for check in "${SPARKC_PREFLIGHT_CHECKS[@]}"; do
    printf 'check_%s\n' "$check"
  done
  printf 'echo end\n'
}

declare -A SPARKC_PF=()       # SPARKC_PF[node,KEY]: the values a node printed under KEY, one per line
declare -A SPARKC_PF_RC=()    # how its ssh (or local sh) ended
declare -a SPARKC_PF_PROBLEMS=() SPARKC_PF_PROBLEM_NODES=()
declare -A SPARKC_PF_NOTES=() # SPARKC_PF_NOTES[node,COLUMN]: what the table shows

# Lines of KEY from a node's answer; pf_first: only the first.
pf() { printf '%s' "${SPARKC_PF[$1,$2]-}"; }
pf_first() {
  local value=${SPARKC_PF[$1,$2]-}
  printf '%s' "${value%%$'\n'*}"
}
pf_problem() {
  SPARKC_PF_PROBLEM_NODES+=("$1")
  shift
  SPARKC_PF_PROBLEMS+=("$*")
}
pf_warn() {
  local node=$1
  shift
  warn "$node: $*"
}
pf_note() { SPARKC_PF_NOTES[$1,$2]=$3; }

# Run the remote script on every node at once; answers land in SPARKC_PF, node by node.
preflight_gather() {
  local dir i node script key value line pids=()
  script=$(preflight_script)
  dir=$(mktemp -d)
  for i in "${!SPARKC_NODES[@]}"; do
    node=${SPARKC_NODES[i]}
    preflight_args "$node"
    (
      trap - ERR
      on_node "$node" sh -c "$script" sparkc-preflight "${SPARKC_PF_ARGS[@]}"
    ) >"$dir/$i.out" 2>"$dir/$i.err" </dev/null &
    pids+=("$!")
  done
  for i in "${!SPARKC_NODES[@]}"; do
    node=${SPARKC_NODES[i]}
    SPARKC_PF_RC[$node]=0
    wait "${pids[i]}" || SPARKC_PF_RC[$node]=$?
    while IFS= read -r line; do
      key=${line%% *}
      value=""
      [[ $line == *" "* ]] && value=${line#* }
      SPARKC_PF[$node,$key]+=$value$'\n'
    done <"$dir/$i.out"
    SPARKC_PF[$node,stderr]=$(tr '\n' ' ' <"$dir/$i.err")
  done
  rm -rf "$dir"
}

# A node that did not answer in full: nothing else about it can be judged.
judge_reached() {
  local node=$1
  [[ -n ${SPARKC_PF[$node,end]+x} ]] && return 0
  local err=${SPARKC_PF[$node,stderr]% }
  if is_local "$node"; then
    pf_problem "$node" "the preflight checks could not run on $node: ${err:-no output}"
  elif ((SPARKC_PF_RC[$node] == 255)) || [[ -z ${SPARKC_PF[$node,host]+x} ]]; then
    pf_problem "$node" "cannot reach ${SPARKC_TARGET[$node]} over ssh: ${err:-no answer}. Check the address, that" \
      "sshd runs there and that this user's key is authorized (ssh-copy-id ${SPARKC_TARGET[$node]})"
  else
    pf_problem "$node" "the preflight checks stopped early on $node (exit ${SPARKC_PF_RC[$node]}): ${err:-no output}"
  fi
  return 1
}

# The node's fabric netdev exists and carries its fabric IP (names can differ from node to node); a
# RoCE fabric wants jumbo frames, and a firmware update has been seen to reset the MTU to 1500.
judge_fabric() {
  local node=$1 netdev=${SPARKC_NETDEV[$1]} ip=${SPARKC_FABRIC_IP[$1]} addrs link mtu state cidr
  local here=""
  [[ -n $netdev ]] || { pf_note "$node" fabric "none (one node)"; return 0; }
  is_local "$node" && here="; and run launch-cluster.sh on the head node, $SPARKC_HEAD"
  if [[ -n ${SPARKC_PF[$node,netdev_error]+x} ]]; then
    pf_problem "$node" "network interface $netdev does not exist on $node ($(pf_first "$node" netdev_error))." \
      "Interface names can differ from node to node: check 'ip -br addr' there and set" \
      "cluster.nodes[].fabric.netdev$here"
    pf_note "$node" fabric "no $netdev"
    return 0
  fi
  addrs=$(pf "$node" netdev_addr)
  cidr=$(grep -oE "inet6? $ip/[0-9]+" <<<"$addrs" | head -n1 | cut -d' ' -f2 || true)
  if [[ -z $cidr ]]; then
    pf_problem "$node" "$ip is not an address of $netdev on $node (it has: $(grep -oE 'inet6? [^ ]+' <<<"$addrs" \
      | tr '\n' ' ')). Fix cluster.nodes[].fabric in the spec${here:+, or run launch-cluster.sh on the head node, $SPARKC_HEAD}"
    pf_note "$node" fabric "$netdev lacks $ip"
    return 0
  fi
  link=$(pf_first "$node" netdev_link)
  mtu=$(grep -oE 'mtu [0-9]+' <<<"$link" | cut -d' ' -f2 || true)
  state=$(grep -oE 'state [A-Z]+' <<<"$link" | cut -d' ' -f2 || true)
  pf_note "$node" fabric "$netdev $cidr mtu ${mtu:-?}"
  if [[ $state == DOWN || $state == LOWERLAYERDOWN ]]; then
    pf_problem "$node" "$netdev on $node is $state: the fabric link is not up. Check the cable, then" \
      "ip link set $netdev up"
  fi
  if ((SPARKC_HAS_RDMA[$node])) && [[ -n $mtu ]] && ((mtu < 9000)); then
    pf_warn "$node" "$netdev has MTU $mtu; the RoCE fabric is set up for 9000 (a firmware update can reset it):" \
      "ip link set $netdev mtu 9000"
  fi
}

judge_docker() {
  local node=$1
  if [[ -n ${SPARKC_PF[$node,docker_error]+x} ]]; then
    pf_problem "$node" "docker does not answer on $node: $(pf_first "$node" docker_error). Start it (systemctl" \
      "start docker) and make sure this user may use it (group docker)"
    pf_note "$node" docker "no answer"
    return 0
  fi
  pf_note "$node" docker "$(pf_first "$node" docker_version)"
}

judge_image() {
  local node=$1 id
  [[ -n ${SPARKC_PF[$node,image_id]+x} ]] || return 0
  id=$(pf_first "$node" image_id)
  if [[ $id == - ]]; then
    pf_problem "$node" "image $SPARKC_IMAGE is not on $node. Pull it there, or copy it from the head:" \
      "docker save $SPARKC_IMAGE | ssh ${SPARKC_TARGET[$node]:-$node} docker load"
    pf_note "$node" image missing
    return 0
  fi
  SPARKC_IMAGE_IDS[$node]=$id
  pf_note "$node" image "${id:7:12}"
}

judge_model() {
  local node=$1 files
  if [[ $(pf_first "$node" model_dir) != yes ]]; then
    pf_problem "$node" "model directory $SPARKC_MODEL_HOST_PATH does not exist on $node: weights must sit at the" \
      "same absolute path on every node (copy them once over the fabric with rsync)"
    pf_note "$node" model missing
    return 0
  fi
  files=$(pf "$node" model_file | sort -k2)
  pf_note "$node" model "$(model_summary "$files")"
  case $(pf_first "$node" model_cut) in
    files) pf_warn "$node" "model directory $SPARKC_MODEL_HOST_PATH holds over 20000 files; the list was cut there, so it" \
      "is not compared with the other nodes'" ;;
    time) pf_warn "$node" "listing model directory $SPARKC_MODEL_HOST_PATH took over 10 s and was cut, so it is not" \
      "compared with the other nodes'" ;;
    *) SPARKC_MODEL_FILES[$node]=$files ;;
  esac
}

# The draft model's folder (speculative decoding) is on the node and holds no link into nothing.
judge_draft() {
  local node=$1 dangling
  [[ -n $SPARKC_DRAFT_FOLDER ]] || return 0
  if [[ $(pf_first "$node" draft_dir) != yes ]]; then
    pf_problem "$node" "draft model directory $SPARKC_DRAFT_FOLDER does not exist on $node: copy it to the same path" \
      "on every node"
    return 0
  fi
  dangling=$(pf "$node" draft | sed -n 's/^dangling //p' | head -n 1)
  [[ -z $dangling ]] || pf_problem "$node" "$dangling on $node is a link to a file that does not exist: copy the" \
    "draft model again"
}

# "N files, SIZE" of lines "SIZE PATH".
model_summary() {
  local count=0 bytes=0 size _
  while read -r size _; do
    [[ $size =~ ^[0-9]+$ ]] || continue
    count=$((count + 1)) bytes=$((bytes + size))
  done <<<"$1"
  printf '%d files, %s' "$count" "$(human_bytes "$bytes")"
}
human_bytes() {
  local b=$1
  if ((b >= 1 << 30)); then printf '%d.%dG' $((b >> 30)) $(((b % (1 << 30)) * 10 >> 30))
  elif ((b >= 1 << 20)); then printf '%dM' $((b >> 20))
  elif ((b >= 1 << 10)); then printf '%dK' $((b >> 10))
  else printf '%dB' "$b"; fi
}

# The node's pinned NCCL_IB_GID_INDEX, if its container gets one.
pinned_gid_index() {
  local words=() word
  compiled_run SPARKC_DOCKER_RUN "$1" words
  for word in "${words[@]}"; do
    [[ $word == "NCCL_IB_GID_INDEX="* ]] && { printf '%s' "${word#*=}"; return 0; }
  done
}

judge_hcas() {
  local node=$1 entry hca state gids pinned ok=0 total=0
  [[ -n ${SPARKC_HCAS[$node]} ]] || { pf_note "$node" rdma none; return 0; }
  if [[ $(pf_first "$node" dev_infiniband) == no ]] && ! docker_run_has "$node" --privileged; then
    pf_problem "$node" "/dev/infiniband does not exist on $node: the container gets no RDMA device and NCCL" \
      "falls back to sockets. Load the RDMA drivers there (modprobe ib_uverbs rdma_ucm) or clear" \
      "cluster.nodes[].fabric.hcas"
  fi
  pinned=$(pinned_gid_index "$node")
  for entry in $(pf "$node" hca_missing); do
    total=$((total + 1))
    pf_problem "$node" "RDMA device ${entry%:*} does not exist on $node (it has: $(pf_first "$node" hca_present))." \
      "Names can differ from node to node: check ibdev2netdev there and set cluster.nodes[].fabric.hcas"
  done
  while read -r entry state; do
    [[ -n $entry ]] || continue
    total=$((total + 1))
    hca=${entry%:*}
    if [[ $state != *ACTIVE* ]]; then
      pf_problem "$node" "RDMA device $hca on $node: port ${entry##*:} is ${state#*: }, not ACTIVE. Check the" \
        "cable and the link (ibdev2netdev, ip link)"
      continue
    fi
    gids=$(pf "$node" hca_gid | grep -E "^$entry [0-9]+ [0-9a-f:]+ RoCE v2$" | cut -d' ' -f2 | tr '\n' ' ' || true)
    if [[ -z $gids ]]; then
      pf_problem "$node" "RDMA device $hca on $node has no RoCE v2 GID for an IPv4 address: its netdev has no" \
        "IPv4 address, or RoCE v2 is off. Check ibdev2netdev and ip addr there"
      continue
    fi
    ok=$((ok + 1))
    if [[ -n $pinned && " $gids" != *" $pinned "* ]]; then
      # NCCL takes the pinned index as it is: the launch fails or hangs only after the whole model load.
      pf_problem "$node" "NCCL_IB_GID_INDEX=$pinned, but the RoCE v2 IPv4 GID of $hca is at index ${gids% }" \
        "(the index can differ per device): unset it to let NCCL choose, or pin ${gids%% *}"
    fi
  done <<<"$(pf "$node" hca_state)"
  pf_note "$node" rdma "$ok/$total active"
}

docker_run_has() {
  local words=() word
  compiled_run SPARKC_DOCKER_RUN "$1" words
  for word in "${words[@]}"; do
    [[ $word == "$2" ]] && return 0
  done
  return 1
}

judge_gpus() {
  local node=$1 count procs
  if [[ $(pf_first "$node" gpu_tool) == missing ]]; then
    pf_warn "$node" "nvidia-smi is not installed: its GPUs were not checked"
    pf_note "$node" gpus "unchecked"
    return 0
  fi
  if [[ -n ${SPARKC_PF[$node,gpu_error]+x} ]]; then
    local error
    error=$(pf_first "$node" gpu_error)
    if [[ $error != *"No devices were found"* ]]; then
      pf_problem "$node" "nvidia-smi fails on $node: $error. Check the NVIDIA driver there"
      pf_note "$node" gpus error
      return 0
    fi
  fi
  count=$(pf "$node" gpu | grep -c . || true)
  procs=$(pf "$node" gpu_process | grep -c . || true)
  if ((procs)); then pf_note "$node" gpus "$count, $procs busy"; else pf_note "$node" gpus "$count idle"; fi
  if ((count < SPARKC_GPUS[$node])); then
    pf_problem "$node" "$node has $count GPU(s), the spec says ${SPARKC_GPUS[$node]}: check nvidia-smi there (driver" \
      "loaded? GPU visible?) or fix cluster.nodes[].gpus"
  elif ((count > SPARKC_GPUS[$node])); then
    pf_warn "$node" "has $count GPUs, the spec uses ${SPARKC_GPUS[$node]}"
  fi
  # sparkc's own containers (this deployment's, or another's beside it: judge_beside budgets those) may hold
  # the GPU; anything else must be stopped first.
  local foreign
  foreign=$(foreign_gpu_processes "$node")
  if [[ -n $foreign ]]; then
    pf_problem "$node" "the GPU of $node is busy: $foreign. Stop that program (another engine?) before launching"
  fi
}

# The GPU's processes that run in no sparkc container, as "PID, NAME; ...". A process whose cgroups
# cannot be read is foreign, unless this deployment's container runs there (it holds its own GPU).
foreign_gpu_processes() {
  local node=$1 line pid cgroups id state _ out=() ids=()
  while read -r id state _; do
    [[ $state == running ]] && ids+=("$id")
  done <<<"$(pf "$node" sparkc_container)"
  while IFS= read -r line; do
    [[ -n $line ]] || continue
    pid=${line%%,*}
    cgroups=$(pf "$node" gpu_cgroup | sed -n "s/^$pid //p" | head -n 1)
    if [[ -z $cgroups ]]; then
      [[ $(pf_first "$node" container) == "running "* ]] && continue
    else
      for id in "${ids[@]}"; do
        [[ $cgroups == *"$id"* ]] && continue 2
      done
    fi
    out+=("$line")
  done <<<"$(pf "$node" gpu_process | grep -E '^[0-9]+,' || true)"
  local IFS=';'
  printf '%s' "${out[*]}" | sed 's/;/; /g'
}

# Other sparkc deployments running on the node: their fixed ports must not be this launch's, and their
# memory budgets (container labels) plus this one's must fit in what the node has for engines.
judge_beside() {
  local node=$1 id state name container budget api ports word mine=0 port
  local total=0 parts=() unknown=() words=() mine_ports=() theirs=()
  compiled_run SPARKC_DOCKER_RUN "$node" words
  for word in "${words[@]}"; do
    case $word in
      sparkc.memory-budget=*) mine=${word#*=} ;;
      sparkc.api-port=*) mine_ports+=("$SPARKC_API_PORT") ;;  # this launch's: --port moves it
      sparkc.ports=*) IFS=, read -ra theirs <<<"${word#*=}" && mine_ports+=("${theirs[@]}") ;;
    esac
  done
  while read -r id state name container budget api ports _; do
    [[ -n $id && $state == running && $name != "$SPARKC_DEPLOYMENT" ]] || continue
    name=$(safe_word "$name") container=$(safe_word "$container")  # labels are anyone's text
    if [[ $budget =~ ^[0-9]+$ ]]; then
      total=$((total + budget))
      parts+=("$name $(gb "$budget")")
    else
      unknown+=("$name")
    fi
    theirs=()
    [[ $ports == - ]] || IFS=, read -ra theirs <<<"$ports"
    [[ $api == - ]] || theirs+=("$api")
    for port in "${mine_ports[@]}"; do
      for word in "${theirs[@]}"; do
        [[ $port == "$word" ]] || continue
        pf_problem "$node" "port $port on $node, which $SPARKC_DEPLOYMENT listens on, is taken by deployment $name" \
          "(container $container): stop $name, or give $SPARKC_DEPLOYMENT another port (launch-cluster.sh --port for" \
          "the API; else in the spec) and compile again"
      done
    done
  done <<<"$(pf "$node" sparkc_container)"
  ((${#parts[@]} + ${#unknown[@]})) || return 0
  if ((${#unknown[@]})); then
    pf_problem "$node" "${unknown[*]} runs on $node without a memory budget on its containers (compiled by an" \
      "older sparkc, or SGLang without engine.gpu_memory_utilization), so $SPARKC_DEPLOYMENT cannot be budgeted beside" \
      "it: stop it, or compile it again with this sparkc"
    return 0
  fi
  if ((mine == 0)); then
    pf_problem "$node" "$SPARKC_DEPLOYMENT's memory on $node is not budgeted (PLAN.md says why) and other deployments" \
      "run there: set engine.gpu_memory_utilization (or engine.kv_cache_memory with model.size_gb) and compile again"
    return 0
  fi
  local need=$((total + mine)) room=${SPARKC_MEMORY_ROOM[$node]} beside
  beside=$(printf '%s + ' "${parts[@]}")
  beside=${beside% + }
  if ((need > room)); then
    pf_problem "$node" "$node cannot hold $SPARKC_DEPLOYMENT ($(gb "$mine")) beside what runs there: $beside;" \
      "$(gb "$need") in all, more than the $(gb "$room") it has for engines (memory_gb less the OS's share)." \
      "Stop one of them (its stop-cluster.sh), or lower engine.gpu_memory_utilization and compile again"
  else
    log "$node: $SPARKC_DEPLOYMENT ($(gb "$mine")) beside $beside: $(gb "$need") of $(gb "$room") for engines"
  fi
}

# Bytes as decimal GB with one decimal, as the compiler writes memory sizes.
gb() { printf '%d.%d GB' $(($1 / 1000000000)) $(($1 % 1000000000 / 100000000)); }

judge_mounts() {
  local node=$1 path
  while IFS= read -r path; do
    [[ -n $path ]] || continue
    pf_problem "$node" "mount source $path does not exist on $node: docker would mount an empty folder made" \
      "by root in its place. Create it there (the same path on every node), or fix container.mounts"
  done <<<"$(pf "$node" mount_missing)"
}

judge_memory() {
  local node=$1 total available free cached
  total=$(pf "$node" memory | awk '$1 == "MemTotal:" { print $2 }')
  available=$(pf "$node" memory | awk '$1 == "MemAvailable:" { print $2 }')
  free=$(pf "$node" memory | awk '$1 == "MemFree:" { print $2 }')
  cached=$(pf "$node" memory | awk '$1 == "Cached:" { print $2 }')
  [[ $total =~ ^[0-9]+$ && $available =~ ^[0-9]+$ ]] || return 0
  [[ $free =~ ^[0-9]+$ && $cached =~ ^[0-9]+$ ]] || { free=$available cached=0; }
  pf_note "$node" memory "$(human_bytes $((free * 1024)))/$(human_bytes $((total * 1024)))"
  # GPU and CPU share this memory; the engine's share is a fraction of the whole (an engine with a start
  # check of free memory: judge_start_gate compares with its own fraction).
  if ((available * 10 < total * 8 && SPARKC_START_GATE_PPM == 0)); then
    pf_warn "$node" "only $(human_bytes $((available * 1024))) of $(human_bytes $((total * 1024))) memory is" \
      "available: other programs hold memory the GPU shares (drop caches: sync; echo 3 > /proc/sys/vm/drop_caches)"
  elif ((free * 10 < total * 8 && !SPARKC_DROP_PAGE_CACHE)); then
    # MemAvailable counts page cache as free; GB10's cudaMemGetInfo does not, and SGLang and older vLLM
    # size their memory pools from it.
    pf_warn "$node" "$node has $(human_bytes $((free * 1024))) free and $(human_bytes $((cached * 1024))) in page" \
      "cache of $(human_bytes $((total * 1024))): the GPU counts the cache as used, so the engine may size its" \
      "pools too small or refuse to start; set launch.drop_page_cache: true to drop it before the containers start"
  fi
}

# Every node runs the same image build and sees the same model folder (file list and sizes).
judge_across_nodes() {
  local node first_id="" first_node="" first_files="" model_node="" diff
  for node in "${SPARKC_NODES[@]}"; do
    if [[ -n ${SPARKC_IMAGE_IDS[$node]-} ]]; then
      if [[ -z $first_id ]]; then
        first_id=${SPARKC_IMAGE_IDS[$node]} first_node=$node
      elif [[ ${SPARKC_IMAGE_IDS[$node]} != "$first_id" ]]; then
        pf_problem "$node" "image $SPARKC_IMAGE differs between nodes: $first_node has $first_id, $node has" \
          "${SPARKC_IMAGE_IDS[$node]}. Every node must run the same build: copy it with docker save $SPARKC_IMAGE |" \
          "ssh ${SPARKC_TARGET[$node]:-$node} docker load"
      fi
    fi
    [[ -n ${SPARKC_MODEL_FILES[$node]+x} ]] || continue
    if [[ -z $model_node ]]; then
      model_node=$node first_files=${SPARKC_MODEL_FILES[$node]}
    elif [[ ${SPARKC_MODEL_FILES[$node]} != "$first_files" ]]; then
      diff=$(model_difference "$first_files" "${SPARKC_MODEL_FILES[$node]}" "$model_node" "$node")
      pf_problem "$node" "model folder $SPARKC_MODEL_HOST_PATH on $node differs from $model_node: $diff. Copy it again" \
        "from one node to the others (rsync -a --delete over the fabric)"
    fi
  done
}

# The first few differences between two "SIZE PATH" listings, in words.
model_difference() {
  local a=$1 b=$2 name_a=$3 name_b=$4 path size out=() seen=0
  declare -A size_a=() size_b=()
  while read -r size path; do [[ -n $path ]] && size_a[$path]=$size; done <<<"$a"
  while read -r size path; do [[ -n $path ]] && size_b[$path]=$size; done <<<"$b"
  for path in $(printf '%s\n' "${!size_a[@]}" "${!size_b[@]}" | sort -u); do
    if [[ -z ${size_b[$path]+x} ]]; then
      out+=("${path#./} missing on $name_b")
    elif [[ -z ${size_a[$path]+x} ]]; then
      out+=("${path#./} only on $name_b")
    elif [[ ${size_a[$path]} != "${size_b[$path]}" ]]; then
      out+=("${path#./} is ${size_a[$path]} bytes on $name_a, ${size_b[$path]} on $name_b")
    else
      continue
    fi
    seen=$((seen + 1))
    ((seen < 4)) || break
  done
  local IFS=';'
  printf '%s' "${out[*]}" | sed 's/;/; /g'
}

# Gather, judge every node, compare them. Returns 1 if anything is wrong (SPARKC_PF_PROBLEMS says what).
preflight_checks() {
  local node judge
  declare -gA SPARKC_MODEL_FILES=()
  preflight_gather
  for node in "${SPARKC_NODES[@]}"; do
    judge_reached "$node" || continue
    for judge in "${SPARKC_PREFLIGHT_JUDGES[@]}"; do
      "judge_$judge" "$node"
    done
  done
  judge_across_nodes
  ((${#SPARKC_PF_PROBLEMS[@]} == 0))
}

# Node by node: what preflight saw, and ok or what is wrong.
preflight_table() {
  local node i result columns=(docker image model fabric rdma gpus memory)
  local format='%-14s %-9s %-14s %-20s %-32s %-12s %-10s %-13s %s\n'
  # shellcheck disable=SC2059  # the format is the constant above
  printf "$format" NODE DOCKER IMAGE MODEL FABRIC RDMA GPUS "MEM FREE" RESULT
  for node in "${SPARKC_NODES[@]}"; do
    result=ok
    for i in "${!SPARKC_PF_PROBLEM_NODES[@]}"; do
      [[ ${SPARKC_PF_PROBLEM_NODES[i]} == "$node" ]] && { result=FAILED; break; }
    done
    local cells=()
    for i in "${columns[@]}"; do
      cells+=("$(printable "${SPARKC_PF_NOTES[$node,$i]:--}")")
    done
    # shellcheck disable=SC2059
    printf "$format" "$node" "${cells[@]}" "$result"
  done
  for i in "${!SPARKC_PF_PROBLEMS[@]}"; do
    printf '%s: %s\n' "${SPARKC_PF_PROBLEM_NODES[i]}" "$(printable "${SPARKC_PF_PROBLEMS[i]}")"
  done
}
