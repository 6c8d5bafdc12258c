# Secret values, taken from this script's environment before anything else runs.
declare -A SECRET_VALUES=()
for secret in "${SECRETS[@]}"; do
  SECRET_VALUES[$secret]=${!secret-}
done
unset secret

# A secret's length in bytes (not characters: the locale may be UTF-8).
secret_bytes() {
  local LC_ALL=C
  local value=${SECRET_VALUES[$1]}
  printf '%s' "${#value}"
}

# ARGV: the `docker run` words of a node, with the engine's timeout taken from this launch's budget.
docker_run_argv() {
  local -n words="DOCKER_RUN_${RANK[$1]}"
  ARGV=("${words[@]}")
  local i engine_timeout=$((TIMEOUT - ENGINE_TIMEOUT_MARGIN))
  ((engine_timeout >= 30)) || engine_timeout=30
  for i in "${!ARGV[@]}"; do
    if [[ -n $ENGINE_TIMEOUT_VARIABLE && ${ARGV[i]} == "$ENGINE_TIMEOUT_VARIABLE="* ]]; then
      ARGV[i]="$ENGINE_TIMEOUT_VARIABLE=$engine_timeout"
    elif [[ -n $ENGINE_TIMEOUT_FLAG && $i -gt 0 && ${ARGV[i - 1]} == "$ENGINE_TIMEOUT_FLAG" ]]; then
      ARGV[i]=$engine_timeout
    fi
  done
  with_extra_env
}

# -- launch-time overrides (--env) --------------------------------------------------------------
EXTRA_ENV=()

usage_error() {
  echo "launch-cluster.sh: $*" >&2
  exit 2
}

# One --env 'NAME=VALUE', checked as the compiler checks the spec's env; the value is never evaluated.
add_extra_env() {
  local item=$1 name=${1%%=*} known
  [[ $item == *=* ]] || usage_error "--env needs 'NAME=VALUE', got '$item'"
  [[ $name =~ ^[A-Z_][A-Z0-9_]*$ ]] \
    || usage_error "--env $name: names are upper-case letters, digits and '_', not starting with a digit"
  if [[ " $RESERVED_NAMES " == *" $name "* || $name == BASH_* || $name == LC_* || $name == DOCKER_RUN_* ]]; then
    usage_error "--env $name: a name the shell or the generated scripts use themselves; choose another"
  fi
  if [[ $name =~ $SECRET_NAME_PATTERN || " ${SECRETS[*]} " == *" $name "* ]]; then
    usage_error "--env $name looks like a secret: list it under container.secrets in the spec, compile, and" \
      "export it where this script runs (a value given here would show in the process list)"
  fi
  for known in "${EXTRA_ENV[@]}"; do
    [[ ${known%%=*} != "$name" ]] || usage_error "--env $name is given twice"
  done
  EXTRA_ENV+=("$item")
}

# A name the plan already sets (the spec's env or sparkc's per-node settings) changes what was
# compiled and checked together: refused, with the way to change it.
check_extra_env() {
  local node item i
  for node in "${NODES[@]}"; do
    local -n planned="DOCKER_RUN_${RANK[$node]}"
    for ((i = 1; i < ${#planned[@]}; i++)); do
      [[ ${planned[i - 1]} == -e ]] || continue
      for item in "${EXTRA_ENV[@]}"; do
        if [[ ${planned[i]%%=*} == "${item%%=*}" ]]; then
          usage_error "--env ${item%%=*} is set by the compiled plan (on $node); change it in the spec and run" \
            "sparkc compile again"
        fi
      done
    done
    unset -n planned
  done
}

# ARGV with the --env variables added right after `docker run`, each as the two words -e and 'NAME=VALUE'.
with_extra_env() {
  ((${#EXTRA_ENV[@]})) || return 0
  local item extra=()
  for item in "${EXTRA_ENV[@]}"; do extra+=(-e "$item"); done
  ARGV=("${ARGV[@]:0:2}" "${extra[@]}" "${ARGV[@]:2}")
}

# For last-launch.txt: the overrides of this run, by name (values may be anything typed).
describe_overrides() {
  local item
  for item in "${EXTRA_ENV[@]}"; do printf 'override.env=%s\n' "${item%%=*}"; done
}

usage() {
  cat <<'USAGE'
Usage: launch-cluster.sh [--dry-run] [--skip-preflight] [--timeout SECONDS] [--env 'NAME=VALUE']... [--yes]

Starts the deployment on every node and waits until the OpenAI-compatible endpoint answers
(/health, /v1/models naming the served model, a one-token completion).

  --dry-run          print every command, per node, and touch nothing
  --skip-preflight   skip the checks of ssh, docker, image and model on every node
  --timeout SECONDS  budget for the whole start (default from the spec)
  --env 'NAME=VALUE' an extra variable in every container, for this launch only (repeatable);
                     upper-case names the plan does not set already, no secrets (list those
                     under container.secrets); recorded by name in last-launch.txt
  --yes              replace a running deployment of the same name
  -h, --help         this text

Anything else (nodes, layout, image, ports, variables the plan sets) is part of the compiled
plan: change the spec and run `sparkc compile` again.

Exit status: 0 ready (or already running and healthy), 1 launch failed (logs saved under
logs/ beside this script, containers kept for inspection), 2 usage, 130 interrupted.
USAGE
}

PHASE=setup
declare -A IMAGE_IDS=()
PHASE_START=$SECONDS
FAILED_NODE=""
SKIP_PREFLIGHT=0
REPLACE=0
TIMEOUT=$DEFAULT_TIMEOUT
DEADLINE=0

phase() {
  PHASE=$1
  PHASE_START=$SECONDS
  log "== $1: $2"
}
phase_done() { log "== $PHASE done in $((SECONDS - PHASE_START))s"; }

# Stop the launch: save every node's logs and state, say which node and phase failed, exit 1.
fail() {
  FAILED_NODE=$1
  shift
  trap - ERR
  printf '%s [sparkc] FAILED in phase %s on node %s: %s\n' "$(date +%H:%M:%S)" "$PHASE" "$FAILED_NODE" "$*" >&2
  if ((DRY_RUN)); then
    exit 1
  fi
  local dir
  dir="$SCRIPT_DIR/logs/$(date -u +%Y%m%dT%H%M%SZ)"
  collect_logs "$dir" 500
  { printf 'phase=%s\nnode=%s\nreason=%s\n' "$PHASE" "$FAILED_NODE" "$*"; describe_overrides; } >"$dir/failure.txt"
  if [[ -n $FAILED_NODE && -f $dir/$FAILED_NODE.log ]]; then
    printf -- '--- last lines of %s (%s) ---\n' "$FAILED_NODE" "${CONTAINER[$FAILED_NODE]:-}" >&2
    tail -n 30 "$dir/$FAILED_NODE.log" >&2
    printf -- '---\n' >&2
  fi
  printf 'Logs and container states of every node: %s\n' "$dir" >&2
  printf 'Containers are kept for inspection; stop them with %s/stop-cluster.sh\n' "$SCRIPT_DIR" >&2
  exit 1
}

on_error() { fail "${FAILED_NODE:-$HEAD}" "unexpected error (exit $1) at line $2 of launch-cluster.sh"; }
on_interrupt() {
  trap - ERR
  warn "interrupted in phase $PHASE; containers started so far are kept (stop-cluster.sh removes them)"
  exit 130
}

time_left() { ((SECONDS < DEADLINE)); }

# -- phase 1 ---------------------------------------------------------------------------------
preflight() {
  phase preflight "ssh, docker, image and model on every node"
  local node id first_id="" first_node="" out
  local tools=(docker curl)
  if ((${#NODES[@]} > 1)); then tools+=(ssh); fi
  for out in "${tools[@]}"; do
    command -v "$out" >/dev/null && continue
    ((DRY_RUN)) && { warn "'$out' is not installed here; a real launch stops here"; continue; }
    fail "$HEAD" "'$out' is not installed on the head node"
  done
  for out in "${SECRETS[@]}"; do
    [[ -n ${SECRET_VALUES[$out]} ]] && continue
    ((DRY_RUN)) && { warn "secret $out is not set; a real launch stops here"; continue; }
    fail "$HEAD" "secret $out is not set (or empty): export it in the shell that runs this script"
  done
  for node in "${NODES[@]}"; do
    FAILED_NODE=$node
    if ! is_local "$node"; then
      out=$(run_on "$node" true 2>&1) \
        || fail "$node" "cannot reach ${TARGET[$node]} over ssh: ${out:-no answer}. Check the address, that" \
          "sshd runs there and that this user's key is authorized (ssh-copy-id ${TARGET[$node]})"
    fi
    check_fabric_address "$node"
    out=$(run_on "$node" docker version --format '{{.Server.Version}}' 2>&1) \
      || fail "$node" "docker does not answer on $node: ${out}. Start it (systemctl start docker) and make" \
        "sure this user may use it (group docker)"
    id=$(run_on "$node" docker image inspect --format '{{.Id}}' "$IMAGE" 2>/dev/null) \
      || fail "$node" "image $IMAGE is not on $node. Pull it there, or copy it from the head:" \
        "docker save $IMAGE | ssh ${TARGET[$node]:-$node} docker load"
    if [[ -z $first_id ]]; then
      first_id=$id first_node=$node
    elif [[ $id != "$first_id" ]]; then
      fail "$node" "image $IMAGE differs between nodes: $first_node has $first_id, $node has $id." \
        "Every node must run the same build: copy it with docker save $IMAGE | ssh ${TARGET[$node]:-$node} docker load"
    fi
    run_on "$node" test -d "$MODEL_HOST_PATH" \
      || fail "$node" "model directory $MODEL_HOST_PATH does not exist on $node: weights must sit at the" \
        "same absolute path on every node (copy them once over the fabric with rsync)"
    ((DRY_RUN)) || log "$node: reachable, docker $out, image ${id:7:12}, model present"
    IMAGE_IDS[$node]=$id
  done
  FAILED_NODE=""
  check_profile
  if ((RAY_REQUIRED)); then
    out=$(run_on "$HEAD" docker run --rm --network none --entrypoint ray "$IMAGE" --version 2>&1) \
      || fail "$HEAD" "Ray is not in image $IMAGE (${out##*$'\n'}). Recent vLLM images ship without it:" \
        "use engine.backend native, or an image with Ray"
    ((DRY_RUN)) || log "image has ${out##*$'\n'}"
  fi
  phase_done
}

# The node's fabric netdev exists and carries its fabric IP (names can differ from node to node); a
# RoCE fabric wants jumbo frames, and a firmware update has been seen to reset the MTU to 1500.
check_fabric_address() {
  local node=$1 addr link mtu
  local netdev=${NETDEV[$1]} ip=${FABRIC_IP[$1]}
  addr=$(run_on "$node" ip -o addr show dev "$netdev" 2>&1) \
    || fail "$node" "network interface $netdev does not exist on $node ($addr). Interface names can differ" \
      "from node to node: check 'ip -br addr' there and set cluster.nodes[].fabric.netdev$(is_local "$node" \
      && echo "; and run launch-cluster.sh on the head node, $HEAD")"
  ((DRY_RUN)) && return 0
  [[ $addr == *" $ip/"* ]] \
    || fail "$node" "$ip is not an address of $netdev on $node (it has: $(grep -oE 'inet6? [^ ]+' <<<"$addr" \
      | tr '\n' ' ')). Fix cluster.nodes[].fabric in the spec$(is_local "$node" \
      && echo ", or run launch-cluster.sh on the head node, $HEAD")"
  link=$(run_on "$node" ip -o link show dev "$netdev" 2>&1) || link=""
  mtu=$(grep -oE 'mtu [0-9]+' <<<"$link" | cut -d' ' -f2)
  if ((HAS_RDMA[$node])) && [[ -n $mtu ]] && ((mtu < 9000)); then
    warn "$node: $netdev has MTU $mtu; the RoCE fabric is set up for 9000 (a firmware update can reset it):" \
      "ip link set $netdev mtu 9000"
  fi
}

# The image must still behave as its profile says (entrypoint, variables its entrypoint reads).
check_profile() {
  [[ -n $EXPECTED_ENTRYPOINT || ${#PROFILE_ENV_DEFAULTS[@]} -gt 0 ]] || return 0
  local entry envs expected name line problems=()
  if ((DRY_RUN)); then
    run_on "$HEAD" docker image inspect --format '{{json .Config.Entrypoint}} {{json .Config.Env}}' "$IMAGE"
    return 0
  fi
  entry=$(on_node "$HEAD" docker image inspect --format '{{json .Config.Entrypoint}}' "$IMAGE")
  if [[ -n $EXPECTED_ENTRYPOINT && $entry != "$EXPECTED_ENTRYPOINT" ]]; then
    problems+=("entrypoint is $entry, profile $PROFILE_NAME expects $EXPECTED_ENTRYPOINT")
  fi
  envs=$(on_node "$HEAD" docker image inspect --format '{{range .Config.Env}}{{println .}}{{end}}' "$IMAGE")
  for expected in "${PROFILE_ENV_DEFAULTS[@]}"; do
    name=${expected%%=*}
    line=$(grep -m1 "^$name=" <<<"$envs" || true)
    if [[ -n $line && $line != "$expected" ]]; then
      problems+=("image sets $line, the plan assumed $expected")
    fi
  done
  ((${#problems[@]})) || { log "image matches profile $PROFILE_NAME"; return 0; }
  if ((PROFILE_MISMATCH_FATAL)); then
    fail "$HEAD" "image $IMAGE no longer matches profile $PROFILE_NAME: ${problems[*]}." \
      "The port, model path or context length it uses may differ from the plan: use entrypoint: bypass" \
      "in the spec, or update the profile"
  fi
  warn "image $IMAGE differs from profile $PROFILE_NAME: ${problems[*]} (entrypoint is bypassed, so the launch goes on)"
}

# What ran, for the next person to ask: when, from which spec, and each node's image ID (a tag such
# as :latest can name another build on the next pull).
record_launch() {
  local node
  {
    printf 'launched=%s\nspec_sha256=%s\nimage=%s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$SPEC_SHA256" "$IMAGE"
    for node in "${NODES[@]}"; do
      printf 'image_id.%s=%s\n' "$node" "${IMAGE_IDS[$node]:-unknown (preflight skipped)}"
    done
    describe_overrides
  } >"$SCRIPT_DIR/last-launch.txt"
  log "recorded in $SCRIPT_DIR/last-launch.txt"
}

# -- phase 2 ---------------------------------------------------------------------------------
# Find this deployment's containers (by name and label, nothing else) and decide what to do with them.
clear_old() {
  phase cleanup "containers left by an earlier launch of $DEPLOYMENT"
  local node info label state sha running=0 same=0 existing=()
  for node in "${NODES[@]}"; do
    FAILED_NODE=$node
    if ((DRY_RUN)); then
      existing+=("$node")
      continue
    fi
    info=$(on_node "$node" docker inspect --format \
      '{{index .Config.Labels "sparkc.deployment"}} {{.State.Status}} {{index .Config.Labels "sparkc.spec-sha256"}}' \
      "${CONTAINER[$node]}" 2>/dev/null) || continue
    read -r label state sha <<<"$info"
    if [[ $label != "$DEPLOYMENT" ]]; then
      fail "$node" "a container named ${CONTAINER[$node]} exists on $node but was not created by deployment" \
        "$DEPLOYMENT; sparkc will not remove it: remove or rename it yourself"
    fi
    existing+=("$node")
    if [[ $state == running ]]; then
      running=$((running + 1))
      [[ $sha == "$SPEC_SHA256" ]] && same=$((same + 1))
    fi
  done
  FAILED_NODE=""
  if ((running > 0 && REPLACE == 0)); then
    if ((same == ${#NODES[@]})) && endpoint_healthy; then
      log "$DEPLOYMENT is already running from this spec and its endpoint is healthy: nothing to do"
      log "(pass --yes to replace it anyway)"
      exit 0
    fi
    fail "$HEAD" "$DEPLOYMENT is running on $running node(s) (from this spec on $same), but is not healthy" \
      "or is from another spec. Pass --yes to replace it, or run stop-cluster.sh first"
  fi
  for node in "${existing[@]}"; do
    FAILED_NODE=$node
    if ((DRY_RUN == 0)); then log "$node: removing old container ${CONTAINER[$node]}"; fi
    run_on "$node" docker rm -f "${CONTAINER[$node]}" >/dev/null
  done
  FAILED_NODE=""
  phase_done
}

# -- phase 3 ---------------------------------------------------------------------------------
# Something accepts connections on HOST:PORT (bash's /dev/tcp; bounded, an unroutable address must not hang).
# shellcheck disable=SC2016  # $1 and $2 belong to the inner bash
port_in_use() { timeout 3 bash -c 'exec 3<>"/dev/tcp/$1/$2"' port_in_use "$1" "$2" 2>/dev/null; }

start_containers() {
  phase containers "one container per node, in waves: $(printf '[%s] ' "${START_WAVES[@]}")"
  local i port wave nodes
  if ((DRY_RUN == 0)); then
    for i in "${!HEAD_PORTS[@]}"; do
      port=${HEAD_PORTS[i]}
      if port_in_use 127.0.0.1 "$port" || port_in_use "$HEAD_FABRIC_IP" "$port"; then
        fail "$HEAD" "the ${HEAD_PORT_USES[i]} port $port is already in use on the head by another program:" \
          "free it or choose another port in the spec"
      fi
    done
  fi
  for wave in "${START_WAVES[@]}"; do
    read -ra nodes <<<"$wave"
    start_wave "${nodes[@]}"
    if [[ $BACKEND == ray && $wave == "$HEAD" ]]; then
      wait_ray_head
    fi
  done
  phase_done
}

# Start these nodes' containers at once; then fail naming the first, in order, that did not start.
start_wave() {
  local node dir i=0 failed="" pids=()
  if ((DRY_RUN)); then
    for node; do
      docker_run_argv "$node"
      run_on "$node" "${ARGV[@]}"
    done
    return 0
  fi
  dir=$(mktemp -d)
  for node; do
    log "$node: starting ${CONTAINER[$node]}"
    (
      trap - ERR
      start_one "$node"
    ) >"$dir/$i" 2>&1 &
    pids+=("$!")
    i=$((i + 1))
  done
  # Wait for every one before failing, so no docker run is still in flight while logs are gathered.
  i=0
  for node; do
    wait "${pids[i]}" || failed=${failed:-$i}
    i=$((i + 1))
  done
  if [[ -n $failed ]]; then
    local wave=("$@")
    fail "${wave[failed]}" "docker run failed on ${wave[failed]}: $(cat "$dir/$failed")"
  fi
  rm -rf "$dir"
}

# Start one node's container; on failure print docker's answer and return 1.
start_one() {
  local node=$1 out
  docker_run_argv "$node"
  if ((${#SECRETS[@]})) && ! is_local "$node"; then
    # Secret values travel over ssh's stdin and are read into the remote environment, where
    # `docker run -e NAME` picks them up: they never appear on a command line. Each is read as its
    # exact byte count (dd, one byte at a time, never past it), so any byte but NUL arrives as sent;
    # the x keeps $(...) from dropping trailing newlines.
    local name reads=""
    for name in "${SECRETS[@]}"; do
      reads+="$name=\$(dd bs=1 count=$(secret_bytes "$name") 2>/dev/null; echo x) && $name=\${$name%x} && export $name && "
    done
    out=$(for name in "${SECRETS[@]}"; do printf '%s' "${SECRET_VALUES[$name]}"; done |
      ssh "${SSH_OPTS[@]}" "${TARGET[$node]}" -- "$reads$(sh_quote "${ARGV[@]}")" 2>&1) \
      || { printf '%s\n' "$out"; return 1; }
  else
    out=$(on_node "$node" "${ARGV[@]}" 2>&1) || { printf '%s\n' "$out"; return 1; }
  fi
}

# A container must still be running; if not, the launch fails at once with that node named.
require_running() {
  local node state
  for node in "$@"; do
    state=$(container_state "$node")
    [[ $state == running ]] || fail "$node" "container ${CONTAINER[$node]} is $state on $node"
  done
}

# -- phase 4 (Ray) -----------------------------------------------------------------------------
wait_ray_head() {
  ((DRY_RUN)) && return 0
  log "waiting for the Ray head on $HEAD_FABRIC_IP"
  until port_in_use "$HEAD_FABRIC_IP" "$RAY_PORT"; do
    require_running "$HEAD"
    time_left || fail "$HEAD" "the Ray head did not open port $RAY_PORT within the timeout"
    sleep 1
  done
}

form_ray() {
  phase ray "wait until Ray reports ${#NODES[@]} nodes and $TOTAL_GPUS GPU(s) alive"
  if ((DRY_RUN)); then
    printf '[%s] %s\n' "$HEAD" "docker exec ${CONTAINER[$HEAD]} python3 -c <ray check> ${#NODES[@]} $TOTAL_GPUS ${RAY_EXPECTED_IPS[*]}"
    phase_done
    return 0
  fi
  local out=""
  until out=$(ray_check 2>&1); do
    require_running "${NODES[@]}"
    time_left || fail "$HEAD" "Ray did not form within the timeout: ${out##*$'\n'}"
    sleep 3
  done
  log "${out##*$'\n'}"
  phase_done
}

# -- phase 5 -----------------------------------------------------------------------------------
start_engine() {
  if ((${#ENGINE_EXEC[@]} == 0)); then
    phase engine "the engine is each container's main process; nothing more to start"
    phase_done
    return 0
  fi
  phase engine "$ENGINE on the head through Ray"
  FAILED_NODE=$HEAD
  run_on "$HEAD" "${ENGINE_EXEC[@]}" >/dev/null || fail "$HEAD" "could not start the engine in ${CONTAINER[$HEAD]}"
  FAILED_NODE=""
  phase_done
}

# The engine's exit status once it ended (Ray: it runs by docker exec); fails while it runs, or
# where the engine is the container's main process (then the container's state tells).
engine_exit_status() {
  ((${#ENGINE_EXEC[@]})) || return 1
  on_node "$HEAD" docker exec "${CONTAINER[$HEAD]}" cat /tmp/sparkc-engine.exit 2>/dev/null
}

# -- phase 6 -----------------------------------------------------------------------------------
wait_ready() {
  phase readiness "$PROBE_URL: port, /health, /v1/models, one-token completion; every container alive"
  if ((DRY_RUN)); then
    printf "[%s] curl %s/health; curl %s/v1/models; curl -d '%s' %s/v1/completions\n" \
      "$HEAD" "$PROBE_URL" "$PROBE_URL" "$PROBE_BODY" "$PROBE_URL"
    phase_done
    return 0
  fi
  local stage="" want status
  while :; do
    require_running "${NODES[@]}"
    if status=$(engine_exit_status); then
      fail "$HEAD" "the engine exited with status $status"
    fi
    if ! port_in_use "$PROBE_HOST" "$API_PORT"; then
      want="port $API_PORT"
    elif ! probe_health; then
      want="/health"
    elif ! probe_models; then
      want="/v1/models naming $SERVED_MODEL"
    elif ! probe_completion; then
      want="a completion"
    else
      # The probes took a while: a node that died meanwhile must not be reported ready.
      require_running "${NODES[@]}"
      break
    fi
    if [[ $want != "$stage" ]]; then
      stage=$want
      log "waiting for $want ($((DEADLINE - SECONDS))s left)"
    fi
    time_left || fail "$HEAD" "not ready within ${TIMEOUT}s: still waiting for $want"
    sleep 2
  done
  phase_done
}

# -- phase 7 -----------------------------------------------------------------------------------
# NCCL's INFO lines say which transport it really uses; a node with RDMA devices on sockets runs at
# about 3 GB/s and says nothing else about it. (In Ray mode the workers' lines reach the head's log.)
check_fabric() {
  phase fabric "NCCL's transport on every node"
  local node lines socket
  for node in "${NODES[@]}"; do
    [[ -n ${NCCL_WANT[$node]} ]] || continue
    if ((DRY_RUN)); then
      printf "[%s] docker logs %s | grep -E 'via NET/|Using network'\n" "$node" "${CONTAINER[$node]}" >&3
      continue
    fi
    lines=$(on_node "$node" docker logs "${CONTAINER[$node]}" 2>&1 | grep -E 'via NET/|Using network' || true)
    if [[ -z $lines ]]; then
      warn "$node: no NCCL transport lines in its log (NCCL_DEBUG overridden?); the fabric was not checked"
      continue
    fi
    socket=$(grep -m1 -E 'via NET/Socket|Using network Socket' <<<"$lines" || true)
    if [[ -n $socket && ${NCCL_WANT[$node]} == IB ]]; then
      fail "$node" "NCCL fell back to sockets (about 3 GB/s instead of RDMA): '${socket##*NCCL INFO }'." \
        "Check NCCL_IB_HCA against ibdev2netdev on every node, that the containers see /dev/infiniband" \
        "and that NCCL_IB_DISABLE is 0; set launch.nccl_check: false to accept it"
    fi
    log "$node: NCCL channels $(grep -m1 -oE 'via NET/[A-Za-z]+' <<<"$lines" || grep -m1 -oE 'Using network [A-Za-z]+' <<<"$lines")"
  done
  phase_done
}

main() {
  while (($#)); do
    case $1 in
      --dry-run) DRY_RUN=1 ;;
      --skip-preflight) SKIP_PREFLIGHT=1 ;;
      --yes) REPLACE=1 ;;
      --timeout)
        [[ ${2:-} =~ ^[1-9][0-9]*$ ]] || { echo "launch-cluster.sh: --timeout needs a number of seconds" >&2; exit 2; }
        TIMEOUT=$2
        shift
        ;;
      --env)
        (($# > 1)) || usage_error "--env needs 'NAME=VALUE'"
        add_extra_env "$2"
        shift
        ;;
      -h | --help) usage; exit 0 ;;
      *) echo "launch-cluster.sh: unknown option: $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
  done
  check_extra_env
  DEADLINE=$((SECONDS + TIMEOUT))
  trap 'on_error $? $LINENO' ERR
  trap on_interrupt INT TERM
  log "launching $DEPLOYMENT: ${#NODES[@]} node(s), head $HEAD, image $IMAGE, timeout ${TIMEOUT}s"
  ((DRY_RUN)) && log "dry run: printing commands, touching nothing"
  if ((SKIP_PREFLIGHT)); then
    log "== preflight skipped"
  else
    preflight
  fi
  clear_old
  start_containers
  if [[ $BACKEND == ray ]]; then
    form_ray
  fi
  start_engine
  wait_ready
  if ((NCCL_CHECK)); then
    check_fabric
  fi
  ((DRY_RUN)) && { log "dry run complete"; return 0; }
  log "READY in ${SECONDS}s: $SERVED_MODEL at $ENDPOINT/v1"
  record_launch
  local auth=""
  if [[ -n $API_KEY_VAR ]]; then
    auth=" -H \"Authorization: Bearer \$$API_KEY_VAR\""  # the key stays in the variable: not printed
  elif [[ -n $API_KEY_GIVEN ]]; then
    auth=" -H 'Authorization: Bearer <the key after --api-key in the spec>'"
  fi
  printf 'Try it:\n  curl %s/v1/chat/completions%s -H %q -d %q\n' "$ENDPOINT" "$auth" 'Content-Type: application/json' \
    "{\"model\": $SERVED_MODEL_JSON, \"messages\": [{\"role\": \"user\", \"content\": \"Hello\"}], \"max_tokens\": 32}"
}

main "$@"
