# Secret values, taken from this script's environment before anything else runs (launch_main).
declare -A SPARKC_SECRET_VALUES=()
read_secrets() {
  local secret
  for secret in "${SPARKC_SECRETS[@]}"; do
    SPARKC_SECRET_VALUES[$secret]=${!secret-}
  done
}

# A secret's length in bytes (not characters: the locale may be UTF-8).
secret_bytes() {
  local LC_ALL=C
  local value=${SPARKC_SECRET_VALUES[$1]}
  printf '%s' "${#value}"
}

# compiled_run KIND NODE INTO: the array INTO set to a node's compiled `docker run` words (KIND SPARKC_DOCKER_RUN
# for its container, SPARKC_PROBE_RUN for its probe): the words every node's has, then the node's own. A probe
# takes the container's shared words but those at SPARKC_PROBE_RUN_SKIP, then the words every probe adds.
compiled_run() {
  local -n compiled_nodes="$1_NODES" compiled_at="$1_AT" compiled_into=$3
  local span=${compiled_at[$2]} i shared=("${SPARKC_DOCKER_RUN_SHARED[@]}")
  if [[ $1 == SPARKC_PROBE_RUN ]]; then
    shared=()
    for i in "${!SPARKC_DOCKER_RUN_SHARED[@]}"; do
      [[ " $SPARKC_PROBE_RUN_SKIP " == *" $i "* ]] || shared+=("${SPARKC_DOCKER_RUN_SHARED[i]}")
    done
    shared+=("${SPARKC_PROBE_RUN_SHARED[@]}")
  fi
  # shellcheck disable=SC2034  # the caller's array, through the name reference
  compiled_into=("${shared[@]}" "${compiled_nodes[@]:${span% *}:${span#* }}")
}

# SPARKC_ARGV: the `docker run` words of a node, with the engine's timeout taken from this launch's budget.
docker_run_argv() {
  compiled_run SPARKC_DOCKER_RUN "$1" SPARKC_ARGV
  local i engine_timeout=$((SPARKC_TIMEOUT - SPARKC_ENGINE_TIMEOUT_MARGIN))
  ((engine_timeout >= 30)) || engine_timeout=30
  for i in "${!SPARKC_ARGV[@]}"; do
    if [[ -n $SPARKC_ENGINE_TIMEOUT_VARIABLE && ${SPARKC_ARGV[i]} == "$SPARKC_ENGINE_TIMEOUT_VARIABLE="* ]]; then
      SPARKC_ARGV[i]="$SPARKC_ENGINE_TIMEOUT_VARIABLE=$engine_timeout"
    elif [[ -n $SPARKC_ENGINE_TIMEOUT_FLAG && $i -gt 0 && ${SPARKC_ARGV[i - 1]} == "$SPARKC_ENGINE_TIMEOUT_FLAG" ]]; then
      SPARKC_ARGV[i]=$engine_timeout
    fi
  done
  with_api_port "${SPARKC_API_PORT_AT[$1]}" 0
  substitute_snapshot
  node_folders_argv "$1"
  engine_files_argv
  # After `docker run -d`: the spec's sha256 (deployment.sh), which later launches read off the container.
  SPARKC_ARGV=("${SPARKC_ARGV[@]:0:3}" --label "sparkc.spec-sha256=$SPARKC_SPEC_SHA256" "${SPARKC_ARGV[@]:3}")
  with_extra_env
}

# The words an engine's own files need (TensorRT-LLM): the build folder's path on the head in a `-v`
# source, and (backend mpi) the library's sshd script as each container's command. A dry run names it.
engine_files_argv() {
  [[ -n ${SPARKC_BUILD_PLACEHOLDER:-} ]] || return 0
  local i
  for i in "${!SPARKC_ARGV[@]}"; do
    if [[ ${SPARKC_ARGV[i]} == "$SPARKC_MPI_SSHD_PLACEHOLDER" ]]; then
      if dry_run; then SPARKC_ARGV[i]="<the library's sshd script for mpirun>"; else SPARKC_ARGV[i]=$SPARKC_MPI_SSHD; fi
    elif [[ $i -gt 0 && ${SPARKC_ARGV[i - 1]} == -v && ${SPARKC_ARGV[i]} == "$SPARKC_BUILD_PLACEHOLDER/"* ]]; then
      SPARKC_ARGV[i]=$SPARKC_SCRIPT_DIR${SPARKC_ARGV[i]#"$SPARKC_BUILD_PLACEHOLDER"}
    fi
  done
}

# -- launch-time overrides (--env, --port) ------------------------------------------------------
SPARKC_EXTRA_ENV=()
SPARKC_PORT_OVERRIDE=""

usage_error() {
  echo "launch-cluster.sh: $*" >&2
  exit 2
}

# Whether NAME is one no --env may set: the shell's own, or a prefix the scripts and the shell keep, as the
# compiler refuses it for a secret (compiler/names.py).
env_name_reserved() {
  [[ " ${SPARKC_RESERVED_NAMES[*]} " == *" $1 "* || $1 == SPARKC_* || $1 == BASH_* || $1 == LC_* ]]
}

# One --env 'NAME=VALUE', checked as the compiler checks the spec's env; the value is never evaluated.
add_extra_env() {
  local item=$1 name=${1%%=*} known
  [[ $item == *=* ]] || usage_error "--env needs 'NAME=VALUE', got '$item'"
  ! has_control "${item#*=}" \
    || usage_error "--env $name: control characters (newline, tab, ...) are not allowed in values, as in the spec"
  [[ $name =~ ^[A-Z_][A-Z0-9_]*$ ]] \
    || usage_error "--env $name: names are upper-case letters, digits and '_', not starting with a digit"
  ! env_name_reserved "$name" \
    || usage_error "--env $name: the shell's own name, or one starting with SPARKC_, BASH_ or LC_ (names the" \
      "generated scripts and the shell keep for themselves); choose another"
  if [[ $name =~ $SPARKC_SECRET_NAME_PATTERN || " ${SPARKC_SECRETS[*]} " == *" $name "* ]]; then
    usage_error "--env $name looks like a secret: list it under container.secrets in the spec, compile, and" \
      "export it where this script runs (a value given here would show in the process list)"
  fi
  for known in "${SPARKC_EXTRA_ENV[@]}"; do
    [[ ${known%%=*} != "$name" ]] || usage_error "--env $name is given twice"
  done
  SPARKC_EXTRA_ENV+=("$item")
}

# A name the plan already sets (the spec's env or sparkc's per-node settings) changes what was
# compiled and checked together: refused, with the way to change it.
check_extra_env() {
  local node item i planned=()
  for node in "${SPARKC_NODES[@]}"; do
    compiled_run SPARKC_DOCKER_RUN "$node" planned
    for ((i = 1; i < ${#planned[@]}; i++)); do
      [[ ${planned[i - 1]} == -e ]] || continue
      for item in "${SPARKC_EXTRA_ENV[@]}"; do
        [[ ${planned[i]%%=*} == "${item%%=*}" ]] || continue
        [[ ${item%%=*} != "$SPARKC_API_PORT_VARIABLE" ]] || usage_error "--env ${item%%=*} carries the API's port: use --port"
        usage_error "--env ${item%%=*} is set by the compiled plan (on $node); change it in the spec and run" \
          "sparkc compile again"
      done
    done
  done
}

# SPARKC_ARGV with the --env variables added right after `docker run`, each as the two words -e and 'NAME=VALUE'.
with_extra_env() {
  ((${#SPARKC_EXTRA_ENV[@]})) || return 0
  local item extra=()
  for item in "${SPARKC_EXTRA_ENV[@]}"; do extra+=(-e "$item"); done
  SPARKC_ARGV=("${SPARKC_ARGV[@]:0:2}" "${extra[@]}" "${SPARKC_ARGV[@]:2}")
}

# --port N: the API's port for this launch. Every use follows: the engine's words, the port-in-use
# check, the readiness probes, the messages, and (through last-launch.txt) status.sh.
set_port_override() {
  local port=$1 i
  [[ -z $SPARKC_PORT_OVERRIDE ]] || usage_error "--port is given twice"
  valid_port "$port" || usage_error "--port needs a port number from 1 to 65535, got '$port'"
  port=$((10#$port))
  if [[ -z $SPARKC_API_PORT_FLAG && -z $SPARKC_API_PORT_VARIABLE ]]; then
    usage_error "--port: $SPARKC_API_PORT_FIXED, so a launch cannot move it. Set engine.port with entrypoint: adapt" \
      "or bypass in the spec and run sparkc compile again"
  fi
  for i in "${!SPARKC_API_PORT_TAKEN[@]}"; do
    ((port != SPARKC_API_PORT_TAKEN[i])) || usage_error "--port $port is this deployment's ${SPARKC_API_PORT_TAKEN_BY[i]} port; choose another"
  done
  SPARKC_PORT_OVERRIDE=$port
  use_api_port "$port"
}

# with_api_port PLACES OFFSET: SPARKC_ARGV with this launch's API port in the words the compiler recorded as
# carrying it (deployment.sh's SPARKC_API_PORT_AT, SPARKC_ENGINE_API_PORT_AT): each INDEX:PREFIX becomes PREFIX and the
# port, at INDEX past OFFSET. The engine's flag value, `--flag=PORT`, an entrypoint's `-e VARIABLE=PORT`
# and the label sparkc.api-port, which other deployments' preflight and status.sh --all read.
with_api_port() {
  [[ -n $SPARKC_PORT_OVERRIDE ]] || return 0
  local place places
  read -ra places <<<"$1"
  for place in "${places[@]}"; do
    SPARKC_ARGV[$2 + ${place%%:*}]=${place#*:}$SPARKC_PORT_OVERRIDE
  done
}

# For last-launch.txt: the overrides of this run, the extra variables by name (values may be anything typed).
describe_overrides() {
  local item
  for item in "${SPARKC_EXTRA_ENV[@]}"; do printf 'override.env=%s\n' "${item%%=*}"; done
  [[ -z $SPARKC_PORT_OVERRIDE ]] || printf 'override.port=%s\n' "$SPARKC_PORT_OVERRIDE"
}

launch_usage() {
  cat <<'USAGE'
Usage: launch-cluster.sh [--dry-run] [--preflight-only | --skip-preflight] [--no-probe] [--timeout SECONDS]
                         [--env 'NAME=VALUE']... [--port PORT] [--yes]

Starts the deployment on every node and waits until the OpenAI-compatible endpoint answers
(/health, /v1/models naming the served model, a one-token completion).

  --dry-run          print every command, per node, and touch nothing
  --preflight-only   only check every node (ssh, docker, image, model, fabric, RDMA, GPUs,
                     memory), print a table and exit: 0 all ok, 1 otherwise
  --skip-preflight   skip those checks
  --no-probe         skip the all-reduce across the nodes before the engine starts
  --timeout SECONDS  budget for the whole start (default from the spec)
  --env 'NAME=VALUE' an extra variable in every container, for this launch only (repeatable);
                     upper-case names the plan does not set already, no secrets (list those
                     under container.secrets); recorded by name in last-launch.txt
  --port PORT        the API's port for this launch only (1-65535): the engine, the checks and
                     the probes use it; recorded in last-launch.txt, where status.sh reads it.
                     Refused where the image's entrypoint decides the port itself
  --yes              replace a running deployment of the same name
  -h, --help         this text

Anything else (nodes, layout, image, other ports, variables the plan sets) is part of the compiled
plan: change the spec and run `sparkc compile` again.

Exit status: 0 ready (or already running and healthy), 1 launch failed (logs saved under
logs/ beside this script, containers kept for inspection), 2 usage, 130 interrupted.
USAGE
}

SPARKC_PHASE=setup
declare -A SPARKC_IMAGE_IDS=()
SPARKC_PHASE_START=$SECONDS
SPARKC_FAILED_NODE=""
SPARKC_SKIP_PREFLIGHT=0
SPARKC_PREFLIGHT_ONLY=0
SPARKC_REPLACE=0
SPARKC_TIMEOUT=0 # the compiled budget (SPARKC_DEFAULT_TIMEOUT), set by launch_main; --timeout changes it
SPARKC_DEADLINE=0

phase() {
  SPARKC_PHASE=$1
  SPARKC_PHASE_START=$SECONDS
  log "== $1: $2"
}
# Each phase done, for last-launch.txt's timeline: NAME START SECONDS (seconds since the launch started).
SPARKC_TIMELINE=()
phase_done() {
  log "== $SPARKC_PHASE done in $((SECONDS - SPARKC_PHASE_START))s"
  SPARKC_TIMELINE+=("$SPARKC_PHASE $SPARKC_PHASE_START $((SECONDS - SPARKC_PHASE_START))")
}

# Stop the launch: save every node's logs and state, say which node and phase failed, exit 1.
fail() {
  SPARKC_FAILED_NODE=$1
  shift
  trap - ERR
  printf '%s [sparkc] FAILED in phase %s on node %s: %s\n' "$(date +%H:%M:%S)" "$SPARKC_PHASE" "$SPARKC_FAILED_NODE" \
    "$(printable "$*")" >&2
  if dry_run; then
    exit 1
  fi
  local dir
  new_folder "$SPARKC_SCRIPT_DIR/logs" "$(date -u +%Y%m%dT%H%M%SZ)" || exit 1
  dir=$SPARKC_NEW_FOLDER
  collect_logs "$dir" 500
  { printf 'phase=%s\nnode=%s\nreason=%s\n' "$SPARKC_PHASE" "$SPARKC_FAILED_NODE" "$*"; describe_overrides; } \
    | save_file "$dir/failure.txt"
  [[ -z $SPARKC_LAUNCHED_AT ]] || record_launch failed
  if [[ -n $SPARKC_FAILED_NODE && -f $dir/$SPARKC_FAILED_NODE.log ]]; then
    printf -- '--- last lines of %s (%s) ---\n' "$SPARKC_FAILED_NODE" "${SPARKC_CONTAINER[$SPARKC_FAILED_NODE]:-}" >&2
    tail -n 30 "$dir/$SPARKC_FAILED_NODE.log" | printable >&2
    printf -- '---\n' >&2
  fi
  printf 'Logs and container states of every node: %s\n' "$dir" >&2
  printf 'Containers are kept for inspection; stop them with %s/stop-cluster.sh\n' "$SPARKC_SCRIPT_DIR" >&2
  exit 1
}

on_error() { fail "${SPARKC_FAILED_NODE:-$SPARKC_HEAD}" "unexpected error (exit $1) at line $2 of launch-cluster.sh"; }
on_interrupt() {
  trap - ERR
  warn "interrupted in phase $SPARKC_PHASE; containers started so far are kept (stop-cluster.sh removes them)"
  exit 130
}

time_left() { ((SECONDS < SPARKC_DEADLINE)); }

# -- phase 1 ---------------------------------------------------------------------------------
# The checks themselves are in the preflight part above: one round trip per node, all at once.
# The weights' revision and links, and the draft model, judged from each node's preflight answer (asked
# again, node by node, only where a node gave none).
model_checks() {
  SPARKC_FAILED_NODE=$1
  check_model_revision "$1"
  check_draft_model "$1"
  SPARKC_FAILED_NODE=""
}

# The secrets this launch hands on, checked before any node is touched, also with --skip-preflight:
# each set, and the API key one the probes can send. A refusal here saves no logs: nothing ran yet.
check_secrets() {
  local name problems=()
  for name in "${SPARKC_SECRETS[@]}"; do
    [[ -n ${SPARKC_SECRET_VALUES[$name]} ]] \
      || problems+=("secret $name is not set (or empty): export it in the shell that runs this script")
  done
  problems+=("$(api_key_problem)")
  for name in "${problems[@]}"; do
    [[ -n $name ]] || continue
    dry_run && { warn "$name; a real launch stops here"; continue; }
    printf '%s [sparkc] FAILED before any node was touched: %s\n' "$(date +%H:%M:%S)" "$name" >&2
    exit 1
  done
}

preflight() {
  phase preflight "ssh, docker, image, model, fabric, RDMA and GPUs on every node, at once"
  local node out ray_out="" ray_pid="" i
  local tools=(docker curl)
  if ((${#SPARKC_NODES[@]} > 1)); then tools+=(ssh); fi
  for out in "${tools[@]}"; do
    command -v "$out" >/dev/null && continue
    dry_run && { warn "'$out' is not installed here; a real launch stops here"; continue; }
    fail "$SPARKC_HEAD" "'$out' is not installed on the head node"
  done
  if dry_run; then
    for node in "${SPARKC_NODES[@]}"; do
      preflight_args "$node"
      printf '[%s] sh -c <preflight: %s> %s\n' "$node" "${SPARKC_PREFLIGHT_CHECKS[*]}" "$(printf '%q ' "${SPARKC_PF_ARGS[@]}")" >&3
      model_checks "$node"
    done
    check_profile
    ((SPARKC_RAY_REQUIRED)) && sparkc_run "$SPARKC_HEAD" docker run --rm --network none --entrypoint ray "$SPARKC_IMAGE" --version
    if [[ $SPARKC_BACKEND == mpi ]]; then image_sshd_argv && sparkc_run "$SPARKC_HEAD" "${SPARKC_ARGV[@]}"; fi
    phase_done
    return 0
  fi
  [[ $SPARKC_BACKEND != mpi ]] || image_sshd_start
  if ((SPARKC_RAY_REQUIRED)); then
    # Meanwhile, on the head: is Ray in the image? (never pulled here: a missing image is reported below)
    ray_out=$(mktemp)
    (
      trap - ERR
      docker run --rm --pull never --network none --entrypoint ray "$SPARKC_IMAGE" --version
    ) >"$ray_out" 2>&1 </dev/null &
    ray_pid=$!
  fi
  if ! preflight_checks; then
    [[ -z $ray_pid ]] || { wait "$ray_pid" || true; rm -f "$ray_out"; }
    image_sshd_forget
    for ((i = 1; i < ${#SPARKC_PF_PROBLEMS[@]}; i++)); do
      warn "also on ${SPARKC_PF_PROBLEM_NODES[i]}: ${SPARKC_PF_PROBLEMS[i]}"
    done
    fail "${SPARKC_PF_PROBLEM_NODES[0]}" "${SPARKC_PF_PROBLEMS[0]}"
  fi
  gather_model_facts
  for node in "${SPARKC_NODES[@]}"; do
    model_checks "$node"
    log "$node: docker ${SPARKC_PF_NOTES[$node,docker]-}, image ${SPARKC_PF_NOTES[$node,image]-}, model ${SPARKC_PF_NOTES[$node,model]-}," \
      "fabric ${SPARKC_PF_NOTES[$node,fabric]-}, RDMA ${SPARKC_PF_NOTES[$node,rdma]-}, GPUs ${SPARKC_PF_NOTES[$node,gpus]-}," \
      "memory free ${SPARKC_PF_NOTES[$node,memory]:--}${SPARKC_PF_NOTES[$node,planes]:+, ${SPARKC_PF_NOTES[$node,planes]}}"
  done
  check_profile
  if [[ -n $ray_pid ]]; then
    local status=0
    wait "$ray_pid" || status=$?
    out=$(cat "$ray_out")
    rm -f "$ray_out"
    ((status == 0)) || fail "$SPARKC_HEAD" "Ray is not in image $SPARKC_IMAGE (${out##*$'\n'}). Recent vLLM images ship without" \
      "it: use engine.backend native, or an image with Ray"
    log "image has ${out##*$'\n'}"
  fi
  [[ $SPARKC_BACKEND != mpi ]] || image_sshd_judge
  phase_done
}

# backend mpi: mpirun starts the ranks on the other nodes over ssh into their containers, whose main process
# is sshd. Is OpenSSH in the image? A throwaway container on the head answers (never pulled here: a missing
# image is reported by the node checks) while the node checks run.
# Each program as "NAME PATH", or "NAME -" where the image lacks it (sshd: where mpi-sshd.sh looks for it).
# shellcheck disable=SC2016  # for the container's sh
readonly SPARKC_IMAGE_SSHD_SCRIPT='for p in sshd ssh-keygen ssh; do
  w=$(command -v "$p") || w=""
  [ -n "$w" ] || [ ! -x "/usr/sbin/$p" ] || w=/usr/sbin/$p
  echo "$p ${w:--}"
done'
image_sshd_argv() {
  SPARKC_ARGV=(docker run --rm --pull never --network none --entrypoint sh "$SPARKC_IMAGE" -c "$SPARKC_IMAGE_SSHD_SCRIPT")
}
SPARKC_IMAGE_SSHD_PID="" SPARKC_IMAGE_SSHD_OUT=""
image_sshd_start() {
  image_sshd_argv
  SPARKC_IMAGE_SSHD_OUT=$(mktemp)
  (
    trap - ERR
    "${SPARKC_ARGV[@]}"
  ) >"$SPARKC_IMAGE_SSHD_OUT" 2>&1 </dev/null &
  SPARKC_IMAGE_SSHD_PID=$!
}
image_sshd_forget() {
  [[ -n $SPARKC_IMAGE_SSHD_PID ]] || return 0
  wait "$SPARKC_IMAGE_SSHD_PID" || true
  rm -f "$SPARKC_IMAGE_SSHD_OUT"
  SPARKC_IMAGE_SSHD_PID=""
}
image_sshd_judge() {
  local status=0 out missing
  wait "$SPARKC_IMAGE_SSHD_PID" || status=$?
  out=$(cat "$SPARKC_IMAGE_SSHD_OUT")
  rm -f "$SPARKC_IMAGE_SSHD_OUT"
  SPARKC_IMAGE_SSHD_PID=""
  ((status == 0)) || fail "$SPARKC_HEAD" "could not look for sshd in image $SPARKC_IMAGE: ${out##*$'\n'}"
  missing=$(awk '$2 == "-" { printf "%s ", $1 }' <<<"$out")
  missing=${missing% }
  if [[ -z $missing ]]; then
    log "image has $(awk '$1 == "sshd" { print $2 }' <<<"$out") for mpirun"
  elif ((SPARKC_MPI_SSHD_FROM_HOOKS)); then
    log "image has no $missing: container.hooks.pre_engine installs OpenSSH before sshd starts in each container"
  else
    fail "$SPARKC_HEAD" "image $SPARKC_IMAGE has no OpenSSH ($missing missing): mpirun starts the ranks on the other nodes over" \
      "ssh into their containers, whose sshd would not start. Install it first: a container.hooks.pre_engine" \
      "command such as 'apt-get update && apt-get install -y openssh-server' (as NVIDIA's two-Spark playbook" \
      "does; the nodes then need the package mirror), or an image built FROM $SPARKC_IMAGE with openssh-server installed"
  fi
}

# --preflight-only: the checks and a table, node by node; nothing is started.
preflight_only() {
  phase preflight "ssh, docker, image, model, fabric, RDMA and GPUs on every node, at once"
  local ok=0
  preflight_checks || ok=1
  preflight_table
  ((ok == 0)) || { log "preflight FAILED on: $(printf '%s\n' "${SPARKC_PF_PROBLEM_NODES[@]}" | sort -u | tr '\n' ' ')"; exit 1; }
  log "preflight passed on all ${#SPARKC_NODES[@]} node(s)"
  exit 0
}

# The image must still behave as its profile says (entrypoint, variables its entrypoint reads).
check_profile() {
  [[ -n $SPARKC_EXPECTED_ENTRYPOINT || ${#SPARKC_PROFILE_ENV_DEFAULTS[@]} -gt 0 || -n $SPARKC_ENTRYPOINT_SHA256 ]] || return 0
  local entry envs expected name line problems=()
  if dry_run; then
    sparkc_run "$SPARKC_HEAD" docker image inspect --format '{{json .Config.Entrypoint}} {{json .Config.Env}}' "$SPARKC_IMAGE"
    [[ -z $SPARKC_ENTRYPOINT_SHA256 ]] || { entrypoint_sum_argv && sparkc_run "$SPARKC_HEAD" "${SPARKC_ARGV[@]}"; }
    return 0
  fi
  check_entrypoint_sha256
  entry=$(on_node "$SPARKC_HEAD" docker image inspect --format '{{json .Config.Entrypoint}}' "$SPARKC_IMAGE")
  if [[ -n $SPARKC_EXPECTED_ENTRYPOINT && $entry != "$SPARKC_EXPECTED_ENTRYPOINT" ]]; then
    problems+=("entrypoint is $entry, profile $SPARKC_PROFILE_NAME expects $SPARKC_EXPECTED_ENTRYPOINT")
  fi
  envs=$(on_node "$SPARKC_HEAD" docker image inspect --format '{{range .Config.Env}}{{println .}}{{end}}' "$SPARKC_IMAGE")
  for expected in "${SPARKC_PROFILE_ENV_DEFAULTS[@]}"; do
    name=${expected%%=*}
    line=$(grep -m1 "^$name=" <<<"$envs" || true)
    if [[ -n $line && $line != "$expected" ]]; then
      problems+=("image sets $line, the plan assumed $expected")
    fi
  done
  ((${#problems[@]})) || { log "image matches profile $SPARKC_PROFILE_NAME"; return 0; }
  if ((SPARKC_PROFILE_MISMATCH_FATAL)); then
    fail "$SPARKC_HEAD" "image $SPARKC_IMAGE no longer matches profile $SPARKC_PROFILE_NAME: ${problems[*]}." \
      "The port, model path or context length it uses may differ from the plan: use entrypoint: bypass" \
      "in the spec, or update the profile"
  fi
  warn "image $SPARKC_IMAGE differs from profile $SPARKC_PROFILE_NAME: ${problems[*]} (entrypoint is bypassed, so the launch goes on)"
}

# The entrypoint's file must be the one the profile was written from: a tag such as :latest re-pulled can
# bring an entrypoint that reads other variables (another port, another model path), which docker's
# metadata does not show. Its sha256, in a throwaway container on the head.
entrypoint_sum_argv() {
  SPARKC_ARGV=(docker run --rm --pull never --network none --entrypoint sha256sum "$SPARKC_IMAGE" "$SPARKC_ENTRYPOINT_PATH")
}
check_entrypoint_sha256() {
  [[ -n $SPARKC_ENTRYPOINT_SHA256 ]] || return 0
  local out sum
  entrypoint_sum_argv
  out=$(on_node "$SPARKC_HEAD" "${SPARKC_ARGV[@]}" 2>&1) || out="cannot read it: ${out##*$'\n'}"
  sum=${out%% *}
  [[ $sum != "$SPARKC_ENTRYPOINT_SHA256" ]] || return 0
  [[ $sum =~ ^[0-9a-f]{64}$ ]] || sum=$out
  if ((SPARKC_PROFILE_MISMATCH_FATAL)); then
    fail "$SPARKC_HEAD" "the entrypoint $SPARKC_ENTRYPOINT_PATH of image $SPARKC_IMAGE changed since profile $SPARKC_PROFILE_NAME was written" \
      "(sha256 $sum; the profile recorded $SPARKC_ENTRYPOINT_SHA256): it may read other variables, so the port, model" \
      "path or context length may differ from the plan. Read it (docker run --rm --entrypoint cat $SPARKC_IMAGE" \
      "$SPARKC_ENTRYPOINT_PATH), draft the profile again (sparkc profile $SPARKC_IMAGE), review it, save it with the new" \
      "entrypoint_sha256 and compile again; or use container.entrypoint: bypass"
  fi
  warn "the entrypoint $SPARKC_ENTRYPOINT_PATH of image $SPARKC_IMAGE differs from profile $SPARKC_PROFILE_NAME's (sha256 $sum)"
}

# What ran, for the next person to ask: when, from which spec, and each node's image ID (a tag such
# as :latest can name another build on the next pull). Written once the containers start (state
# starting), again when the endpoint is ready, or failed: status.sh and the next launch read the
# port of the containers that are on the nodes now, even when that launch failed.
SPARKC_LAUNCHED_AT=""
SPARKC_READY_AFTER=""  # seconds from the start to READY
record_launch() { # STATE
  local node entry name start took first=""
  dry_run && return 0
  SPARKC_LAUNCHED_AT=${SPARKC_LAUNCHED_AT:-$(date -u +%Y-%m-%dT%H:%M:%SZ)}
  {
    printf 'launched=%s\nstate=%s\nspec_sha256=%s\nimage=%s\n' "$SPARKC_LAUNCHED_AT" "$1" "$SPARKC_SPEC_SHA256" "$SPARKC_IMAGE"
    for node in "${SPARKC_NODES[@]}"; do
      printf 'image_id.%s=%s\n' "$node" "${SPARKC_IMAGE_IDS[$node]:-unknown (preflight skipped)}"
    done
    describe_overrides
    # The timeline: each phase done (start and length in seconds from the launch's start), the time to
    # ready and the readiness completion's time to first token (curl's time to its first byte).
    for entry in "${SPARKC_TIMELINE[@]}"; do
      read -r name start took <<<"$entry"
      printf 'phase.%s=%s %s\n' "$name" "$start" "$took"
    done
    [[ -z $SPARKC_READY_AFTER ]] || printf 'ready_after=%s\n' "$SPARKC_READY_AFTER"
    [[ ! -s $SPARKC_SCRATCH/first-token ]] || first=$(<"$SPARKC_SCRATCH/first-token")
    [[ ! $first =~ ^[0-9]+([.][0-9]+)?$ ]] || printf 'first_token=%s\n' "$first"
  } | save_file "$SPARKC_SCRIPT_DIR/last-launch.txt"
  [[ $1 != ready ]] || log "recorded in $SPARKC_SCRIPT_DIR/last-launch.txt"
}

# Run `FUNC NODE` for every NODE at once, each in a subshell: its output (stdout and stderr) lands in
# PREFIX.I and its exit status in PREFIX.I.rc, I being the node's position in the list. Returns when
# all have ended; the caller judges the answers in node order.
at_once() {
  local prefix=$1 func=$2 i pids=()
  shift 2
  local nodes=("$@")
  for i in "${!nodes[@]}"; do
    (
      trap - ERR
      status=0
      "$func" "${nodes[i]}" >"$prefix.$i" 2>&1 || status=$?
      echo "$status" >"$prefix.$i.rc"
    ) </dev/null &
    pids+=("$!")
  done
  for i in "${!pids[@]}"; do
    wait "${pids[i]}" || true
  done
}

# Whether FUNC ended well, in the at_once run that wrote PREFIX, for the node at position I.
at_once_ok() { [[ $(<"$1.$2.rc") == 0 ]]; }

# -- phase 2 ---------------------------------------------------------------------------------
# Find this deployment's containers (by name and label, nothing else) and decide what to do with them.
clear_old() {
  phase cleanup "containers left by an earlier launch of $SPARKC_DEPLOYMENT"
  local node i label state sha running=0 same=0 existing=()
  if dry_run; then
    existing=("${SPARKC_NODES[@]}")
  else
    old_containers_from_preflight || at_once "$SPARKC_SCRATCH/old" old_container "${SPARKC_NODES[@]}"
    for i in "${!SPARKC_NODES[@]}"; do
      node=${SPARKC_NODES[i]}
      # By the status: for a missing container docker still prints an (empty) line.
      at_once_ok "$SPARKC_SCRATCH/old" "$i" || continue
      # A container without this deployment's label reads as label=its hash (or empty): not ours.
      read -r state label sha <"$SPARKC_SCRATCH/old.$i" || label=""
      if [[ $label != "$SPARKC_DEPLOYMENT" ]]; then
        fail "$node" "a container named ${SPARKC_CONTAINER[$node]} exists on $node but was not created by deployment" \
          "$SPARKC_DEPLOYMENT; sparkc will not remove it: remove or rename it yourself"
      fi
      existing+=("$node")
      if [[ $state == running ]]; then
        running=$((running + 1))
        [[ $sha == "$SPARKC_SPEC_SHA256" ]] && same=$((same + 1))
      fi
    done
  fi
  if ((running > 0 && SPARKC_REPLACE == 0)); then
    local last_port
    last_port=$(last_launch_port)
    if ((same == ${#SPARKC_NODES[@]} && last_port != SPARKC_API_PORT)); then
      fail "$SPARKC_HEAD" "$SPARKC_DEPLOYMENT is running from this spec; last-launch.txt records its API on port $last_port," \
        "this launch asks for port $SPARKC_API_PORT. Pass --yes to replace it, or run stop-cluster.sh first"
    fi
    if ((same == ${#SPARKC_NODES[@]})) && endpoint_healthy; then
      log "$SPARKC_DEPLOYMENT is already running from this spec and its endpoint is healthy: nothing to do"
      log "(pass --yes to replace it anyway)"
      exit 0
    fi
    fail "$SPARKC_HEAD" "$SPARKC_DEPLOYMENT is running on $running node(s) (from this spec on $same), but is not healthy" \
      "or is from another spec. Pass --yes to replace it, or run stop-cluster.sh first"
  fi
  if dry_run; then
    for node in "${existing[@]}"; do sparkc_run "$node" docker rm -f "${SPARKC_CONTAINER[$node]}"; done
    phase_done
    return 0
  fi
  for node in "${existing[@]}"; do
    log "$node: removing old container ${SPARKC_CONTAINER[$node]}"
  done
  at_once "$SPARKC_SCRATCH/rm" remove_container "${existing[@]}"
  for i in "${!existing[@]}"; do
    node=${existing[i]}
    at_once_ok "$SPARKC_SCRATCH/rm" "$i" || fail "$node" "could not remove the old container ${SPARKC_CONTAINER[$node]} on" \
      "$node: $(tr '\n' ' ' <"$SPARKC_SCRATCH/rm.$i")"
  done
  phase_done
}

# A node's container of this name: its state, deployment label and spec hash (fails when there is none).
readonly SPARKC_OLD_CONTAINER_FORMAT='{{.State.Status}} {{index .Config.Labels "sparkc.deployment"}} {{index .Config.Labels "sparkc.spec-sha256"}}'
old_container() { on_node "$1" docker inspect --format "$SPARKC_OLD_CONTAINER_FORMAT" "${SPARKC_CONTAINER[$1]}" 2>/dev/null; }

# Preflight, just before, asked every node the same (check_docker): its answers, in the files
# at_once would leave. Fails where preflight did not run or did not reach every node.
old_containers_from_preflight() {
  local i node
  for node in "${SPARKC_NODES[@]}"; do
    [[ -n ${SPARKC_PF[$node,end]+x} ]] || return 1
  done
  for i in "${!SPARKC_NODES[@]}"; do
    node=${SPARKC_NODES[i]}
    if [[ $(pf_first "$node" container) == missing ]]; then
      echo 1 >"$SPARKC_SCRATCH/old.$i.rc"
    else
      printf '%s\n' "$(pf_first "$node" container)" >"$SPARKC_SCRATCH/old.$i"
      echo 0 >"$SPARKC_SCRATCH/old.$i.rc"
    fi
  done
}
remove_container() { on_node "$1" docker rm -f "${SPARKC_CONTAINER[$1]}"; }

# -- phase 3 ---------------------------------------------------------------------------------
# Something accepts connections on HOST:PORT (bash's /dev/tcp; bounded, an unroutable address must not hang).
# shellcheck disable=SC2016  # $1 and $2 belong to the inner bash
port_in_use() { timeout 3 bash -c 'exec 3<>"/dev/tcp/$1/$2"' port_in_use "$1" "$2" 2>/dev/null; }

# Whether a program on this host listens where an engine binding $1 (0.0.0.0 or :: for every address)
# would need port $2: on that address, or on every address. ss sees listeners on any address (the LAN's
# too); without it, connect to the addresses the launcher knows.
port_taken_at() {
  local host=$1 port=$2 address
  if command -v ss >/dev/null 2>&1; then
    while read -r address; do
      address=${address%:*}
      address=${address#[}
      address=${address%]}
      address=${address%%%*}
      if [[ $host == 0.0.0.0 || $host == :: || $address == 0.0.0.0 || $address == '*' || $address == :: ]] \
        || [[ $address == "$host" ]]; then
        return 0
      fi
    done < <(ss -Hltn "sport = :$port" 2>/dev/null | awk '{ print $4 }')
    return 1
  fi
  port_in_use 127.0.0.1 "$port" || port_in_use "$SPARKC_HEAD_FABRIC_IP" "$port" \
    || { [[ $host == 0.0.0.0 || $host == :: ]] || port_in_use "$host" "$port"; }
}

start_containers() {
  phase containers "one container per node, in waves: $(printf '[%s] ' "${SPARKC_START_WAVES[@]}")"
  local i port wave nodes
  if ! dry_run; then
    watch_pipes
    for i in "${!SPARKC_HEAD_PORTS[@]}"; do
      port=${SPARKC_HEAD_PORTS[i]}
      if [[ ${SPARKC_HEAD_PORT_USES[i]} == API ]]; then
        port=$SPARKC_API_PORT # this launch's, where --port moved it
        if port_taken_at "$SPARKC_API_BIND_HOST" "$port"; then
          fail "$SPARKC_HEAD" "the API port $port is already in use on the head by another program (where the engine" \
            "binds it, $SPARKC_API_BIND_HOST): free it or choose another port in the spec"
        fi
      elif port_in_use 127.0.0.1 "$port" || port_in_use "$SPARKC_HEAD_FABRIC_IP" "$port"; then
        fail "$SPARKC_HEAD" "the ${SPARKC_HEAD_PORT_USES[i]} port $port is already in use on the head by another program:" \
          "free it or choose another port in the spec"
      fi
    done
  fi
  for wave in "${SPARKC_START_WAVES[@]}"; do
    read -ra nodes <<<"$wave"
    start_wave "${nodes[@]}"
    if [[ $SPARKC_BACKEND == ray && $wave == "$SPARKC_HEAD" ]]; then
      wait_ray_head
    fi
  done
  phase_done
}

# Start these nodes' containers at once; then fail naming the first, in order, that did not start.
start_wave() {
  local node dir i=0 failed="" pids=()
  if dry_run; then
    for node; do
      docker_run_argv "$node"
      sparkc_run "$node" "${SPARKC_ARGV[@]}"
    done
    return 0
  fi
  dir=$(mktemp -d)
  for node; do
    log "$node: starting ${SPARKC_CONTAINER[$node]}"
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
  i=0
  for node; do
    SPARKC_CONTAINER_ID[$node]=$(tail -n 1 "$dir/$i")
    watch_start "$node"
    i=$((i + 1))
  done
  rm -rf "$dir"
}

# Start one node's container and print its ID (`docker run -d` prints it last); on failure print
# docker's answer and return 1.
start_one() {
  local node=$1 out
  docker_run_argv "$node"
  if ((${#SPARKC_SECRETS[@]})) && ! is_local "$node"; then
    # Secret values travel over ssh's stdin and are read into the remote environment, where
    # `docker run -e NAME` picks them up: they never appear on a command line. Each is read as its
    # exact byte count (dd, one byte at a time, never past it), so any byte but NUL arrives as sent;
    # the x keeps $(...) from dropping trailing newlines.
    local name reads=""
    for name in "${SPARKC_SECRETS[@]}"; do
      reads+="$name=\$(dd bs=1 count=$(secret_bytes "$name") 2>/dev/null; echo x) && $name=\${$name%x} && export $name && "
    done
    out=$(for name in "${SPARKC_SECRETS[@]}"; do printf '%s' "${SPARKC_SECRET_VALUES[$name]}"; done |
      ssh_node "$node" -- "$reads$(sh_quote "${SPARKC_ARGV[@]}")" 2>&1) \
      || { printf '%s\n' "$out"; return 1; }
  else
    out=$(on_node "$node" "${SPARKC_ARGV[@]}" 2>&1) || { printf '%s\n' "$out"; return 1; }
  fi
  printf '%s\n' "${out##*$'\n'}"
}

# Containers must still be running: each node asked at once (a few ms each over the shared ssh
# connection). If some are not, the launch fails naming the one that stopped first (the others may
# have followed it).
require_running() {
  local node i=0 state finished first="" first_at="" first_state=""
  at_once "$SPARKC_SCRATCH/state" container_status "$@"
  for node; do
    state=missing finished=""
    at_once_ok "$SPARKC_SCRATCH/state" "$i" && { read -r state finished <"$SPARKC_SCRATCH/state.$i" || state=missing; }
    i=$((i + 1))
    [[ $state == running ]] && continue
    finished=$(sortable_time "$finished")
    if [[ -z $first || (-n $finished && ($first_at == "" || $finished < "$first_at")) ]]; then
      first=$node first_at=$finished first_state=$state
    fi
  done
  [[ -n $first ]] || return 0
  first_state=${first_state:-missing}
  # Steps of optional spec features are defined only in the scripts of specs that use them.
  if ((SPARKC_HAS_HOOKS)); then first_state+=$(hook_failure "$first"); fi
  fail "$first" "container ${SPARKC_CONTAINER[$first]} is $first_state on $first"
}
# docker's FinishedAt (RFC 3339, its nanoseconds without trailing zeros: 12:44:03.5Z, 12:44:03Z) with a
# fraction of 9 digits, so that times compare as text: as given, 12:44:03.5Z sorts after 12:44:03.51Z.
sortable_time() {
  if [[ $1 =~ ^([0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2})(\.([0-9]+))?(.*)$ ]]; then
    local fraction=${BASH_REMATCH[3]}000000000
    printf '%s.%s%s' "${BASH_REMATCH[1]}" "${fraction:0:9}" "${BASH_REMATCH[4]}"
  else
    printf '%s' "$1"
  fi
}
container_status() {
  on_node "$1" docker inspect --format '{{.State.Status}} {{.State.FinishedAt}}' "${SPARKC_CONTAINER[$1]}" 2>/dev/null
}

# -- the container watch -------------------------------------------------------------------------
# Once a node's container started, docker itself reports its death as it happens: one `docker events`
# per node (over the shared ssh connection) writes a line to $SPARKC_SCRATCH/watch.I when the container dies.
# A look at those files costs nothing, so the waits below look every tenth of a second, and ask
# docker inspect (require_running: which container stopped first, and how) only when a watch reported
# a death or ended. --since replays what the container did before its watch began, by its ID (no
# earlier container of the same name counts). On the node, sh stops docker events once its stdin
# ends: a pipe that only this script holds open, closed when it exits, however it exits.
# shellcheck disable=SC2016  # expanded by the node's sh
# sparkc-embed SPARKC_WATCH_SH node/watch.sh
# Under Ray the engine is started by docker exec, and its container outlives it: no die event tells of its
# end. Its wrapper writes "sparkc: engine exited with status N" to the container's log; one `docker logs -f`
# on the head, filtered there, brings that line alone. It ends as the watches do (its stdin closed), its
# docker logs stopped with it. The head's container is this launch's, so its whole log counts.
# shellcheck disable=SC2016  # expanded by the node's sh
# sparkc-embed SPARKC_ENGINE_WATCH_SH node/engine-watch.sh
declare -A SPARKC_CONTAINER_ID=() SPARKC_WATCH_START=() SPARKC_WATCH_WARNED=()
SPARKC_WATCH_IN="" # the watches' stdin, held open by this script
SPARKC_WAKE=""     # a pipe a background probe writes to when it ends, so a pause ends with it

# The two pipes (made once, before the first container starts).
watch_pipes() {
  mkfifo "$SPARKC_SCRATCH/watch.in" "$SPARKC_SCRATCH/wake"
  exec {SPARKC_WATCH_IN}<>"$SPARKC_SCRATCH/watch.in" {SPARKC_WAKE}<>"$SPARKC_SCRATCH/wake"
}

# Watch a node's container; its events go to $SPARKC_SCRATCH/watch.I, docker's complaints to watch.I.err,
# its exit status to watch.I.rc when it ends. Replayed from this launch's budget back, before the
# container was created. Without an ID from `docker run -d` (never seen), by name and from now on only:
# an earlier container of that name may have died within the budget.
watch_start() {
  local node=$1 i id=${SPARKC_CONTAINER_ID[$1]} since="${SPARKC_TIMEOUT}s"
  [[ $id =~ ^[0-9a-f]{12,64}$ ]] || { id=${SPARKC_CONTAINER[$node]}; since=0s; }
  i=$(node_index "$node")
  SPARKC_WATCH_START[$node]=$SECONDS
  rm -f "$SPARKC_SCRATCH/watch.$i.rc"
  (
    trap - ERR
    exec {SPARKC_WATCH_IN}>&-  # only this script may hold the watches' stdin open
    status=0
    on_node "$node" sh -c "$SPARKC_WATCH_SH" sparkc-watch "$since" "$id" \
      <"$SPARKC_SCRATCH/watch.in" >>"$SPARKC_SCRATCH/watch.$i" 2>"$SPARKC_SCRATCH/watch.$i.err" || status=$?
    echo "$status" >"$SPARKC_SCRATCH/watch.$i.rc"
  ) 2>/dev/null & # a watch that ends with the script finds its scratch folder gone: nothing to tell
}
node_index() {
  local i
  for i in "${!SPARKC_NODES[@]}"; do
    [[ ${SPARKC_NODES[i]} != "$1" ]] || { printf '%s' "$i"; return 0; }
  done
}

# Every watched container still running? A death fails the launch through require_running, which
# names the container that stopped first and its state. A watch that ended (node unreachable, docker
# refused) is replaced, at most once a second, after docker inspect says its container still runs.
# Under Ray, the engine's log watch tells when the engine ended.
SPARKC_ENGINE_LOOKED=0
watch_check() {
  local node i
  for i in "${!SPARKC_NODES[@]}"; do
    node=${SPARKC_NODES[i]}
    [[ -n ${SPARKC_WATCH_START[$node]+x} ]] || continue
    if [[ -s $SPARKC_SCRATCH/watch.$i ]]; then
      require_running "${SPARKC_NODES[@]}"
      fail "$node" "container ${SPARKC_CONTAINER[$node]} died on $node ($(head -n 1 "$SPARKC_SCRATCH/watch.$i"))"
    fi
    if [[ -e $SPARKC_SCRATCH/watch.$i.rc ]] && ((SECONDS > SPARKC_WATCH_START[$node])); then
      require_running "$node"
      [[ -n ${SPARKC_WATCH_WARNED[$node]+x} ]] || warn "$node: docker events ended ($(tr '\n' ' ' <"$SPARKC_SCRATCH/watch.$i.err"))," \
        "watching ${SPARKC_CONTAINER[$node]} again"
      SPARKC_WATCH_WARNED[$node]=1
      watch_start "$node"
    fi
  done
  ((SPARKC_ENGINE_STARTED)) || return 0
  if [[ -s $SPARKC_SCRATCH/engine.watch ]]; then
    local line
    line=$(head -n 1 "$SPARKC_SCRATCH/engine.watch")
    fail "$SPARKC_HEAD" "the engine exited with status ${line##* }"
  fi
  # The watch ended without that line (docker logs refused, ssh lost): the exit file, once a second.
  if [[ -e $SPARKC_SCRATCH/engine.watch.rc ]] && ((SECONDS > SPARKC_ENGINE_LOOKED)); then
    ((SPARKC_ENGINE_LOOKED)) || warn "$SPARKC_HEAD: the engine's log watch ended ($(tr '\n' ' ' <"$SPARKC_SCRATCH/engine.watch.err"))," \
      "looking at its exit file once a second"
    SPARKC_ENGINE_LOOKED=$SECONDS
    engine_still_running
  fi
}

# Watch the engine's log on the head for its end (see SPARKC_ENGINE_WATCH_SH): the line to $SPARKC_SCRATCH/engine.watch.
engine_watch_start() {
  (
    trap - ERR
    exec {SPARKC_WATCH_IN}>&-  # only this script may hold the watches' stdin open
    status=0
    on_node "$SPARKC_HEAD" sh -c "$SPARKC_ENGINE_WATCH_SH" sparkc-engine-watch "${SPARKC_CONTAINER[$SPARKC_HEAD]}" \
      <"$SPARKC_SCRATCH/watch.in" >>"$SPARKC_SCRATCH/engine.watch" 2>"$SPARKC_SCRATCH/engine.watch.err" || status=$?
    echo "$status" >"$SPARKC_SCRATCH/engine.watch.rc"
  ) 2>/dev/null &
}

# Up to $1 seconds, less where a background probe ends first (no process started for it).
pause() { read -rt "$1" -u "$SPARKC_WAKE" _ || true; }

# Run a probe (a function and its words) in the background, its output in $SPARKC_SCRATCH/probe, while every
# container is watched; returns the probe's status. A probe may take long (an HTTP request, Ray's
# client); a dead container still ends the launch within a tenth of a second or so.
watch_probe() {
  rm -f "$SPARKC_SCRATCH/probe.rc"
  (
    trap - ERR
    status=0
    "$@" >"$SPARKC_SCRATCH/probe" 2>&1 </dev/null || status=$?
    echo "$status" >"$SPARKC_SCRATCH/probe.rc"
    echo >&"$SPARKC_WAKE"
  ) &
  SPARKC_BACKGROUND_PID=$!
  while [[ ! -s $SPARKC_SCRATCH/probe.rc ]]; do
    watch_check
    pause 0.1
  done
  wait "$SPARKC_BACKGROUND_PID" || true
  SPARKC_BACKGROUND_PID=""
  return "$(cat "$SPARKC_SCRATCH/probe.rc")"
}

# Between probes: every container still running? Then a pause of $1 seconds.
watch_pause() {
  watch_check
  pause "$1"
}

# Once started on the head through Ray, the engine must not have exited (its container stays up).
SPARKC_ENGINE_STARTED=0
engine_still_running() {
  ((SPARKC_ENGINE_STARTED)) || return 0
  local status
  if status=$(engine_exit_status); then
    fail "$SPARKC_HEAD" "the engine exited with status $status"
  fi
}

# -- phase 4 (Ray) -----------------------------------------------------------------------------
wait_ray_head() {
  dry_run && return 0
  log "waiting for the Ray head on $SPARKC_HEAD_FABRIC_IP"
  until port_in_use "$SPARKC_HEAD_FABRIC_IP" "$SPARKC_RAY_PORT"; do
    watch_check
    time_left || fail "$SPARKC_HEAD" "the Ray head did not open port $SPARKC_RAY_PORT within the timeout"
    sleep 0.3
  done
}

form_ray() {
  phase ray "wait until Ray reports ${#SPARKC_NODES[@]} nodes and $SPARKC_TOTAL_GPUS GPU(s) alive"
  if dry_run; then
    printf '[%s] %s\n' "$SPARKC_HEAD" "docker exec ${SPARKC_CONTAINER[$SPARKC_HEAD]} python3 -c <ray check> ${#SPARKC_NODES[@]} $SPARKC_TOTAL_GPUS ${SPARKC_RAY_EXPECTED_IPS[*]}"
    phase_done
    return 0
  fi
  local out=""
  until watch_probe ray_check; do
    out=$(cat "$SPARKC_SCRATCH/probe")
    time_left || fail "$SPARKC_HEAD" "Ray did not form within the timeout: ${out##*$'\n'}"
    watch_pause 0.5  # Ray's client is slow to start and costs the engines CPU
  done
  out=$(cat "$SPARKC_SCRATCH/probe")
  log "${out##*$'\n'}"
  phase_done
}

# -- phase 4 (MPI) -----------------------------------------------------------------------------
# Every container runs sshd for mpirun (this script, by the placeholder in its docker run words).
# shellcheck disable=SC2016  # expanded by the container's sh
# sparkc-embed SPARKC_MPI_SSHD node/mpi-sshd.sh
# Seconds a node's sshd may take to answer the head's container before its rank is reported unreachable.
readonly SPARKC_MPI_SSH_WAIT=20

# The head's container gets every container's trust (its public key in their authorized_keys), then
# reaches each other node's container over ssh as mpirun will: a rank that cannot be reached is named
# here, before mpirun would stop with ORTE's "unable to reliably start one or more daemons".
form_mpi() {
  phase mpi "the head's container reaches sshd in every other node's container (port $SPARKC_MPI_SSH_PORT), as mpirun will"
  local node key="" out start
  if dry_run; then
    for node in "${SPARKC_NODES[@]}"; do
      printf '[%s] docker exec %s cat /root/.ssh/id_ed25519.pub | [%s] docker exec -i %s tee -a /root/.ssh/authorized_keys\n' \
        "$SPARKC_HEAD" "${SPARKC_CONTAINER[$SPARKC_HEAD]}" "$node" "${SPARKC_CONTAINER[$node]}"
      [[ $node == "$SPARKC_HEAD" ]] || printf '[%s] docker exec %s cat /etc/ssh/sparkc_host_key.pub | [%s] docker exec -i %s tee -a /root/.ssh/known_hosts\n' \
        "$node" "${SPARKC_CONTAINER[$node]}" "$SPARKC_HEAD" "${SPARKC_CONTAINER[$SPARKC_HEAD]}"
      [[ $node == "$SPARKC_HEAD" ]] || printf '[%s] docker exec %s ssh %s true\n' "$SPARKC_HEAD" "${SPARKC_CONTAINER[$SPARKC_HEAD]}" "${SPARKC_MPI_HOST[$node]}"
    done
    phase_done
    return 0
  fi
  until key=$(on_node "$SPARKC_HEAD" docker exec "${SPARKC_CONTAINER[$SPARKC_HEAD]}" cat /root/.ssh/id_ed25519.pub 2>/dev/null) && [[ -n $key ]]; do
    watch_check
    time_left || fail "$SPARKC_HEAD" "the head's container made no ssh key for mpirun within the timeout"
    sleep 0.3
  done
  for node in "${SPARKC_NODES[@]}"; do
    printf '%s\n' "$key" | on_node "$node" docker exec -i "${SPARKC_CONTAINER[$node]}" sh -c 'cat >>/root/.ssh/authorized_keys' \
      || fail "$node" "could not give ${SPARKC_CONTAINER[$node]} the head container's ssh key for mpirun"
  done
  # mpirun's ssh checks host keys: each container's, made at its start and read here over the launcher's own
  # checked ssh, goes into the head container's known_hosts under the address and port mpirun uses.
  local hostkey kind blob name
  for node in "${SPARKC_NODES[@]}"; do
    [[ $node != "$SPARKC_HEAD" ]] || continue
    until hostkey=$(on_node "$node" docker exec "${SPARKC_CONTAINER[$node]}" cat /etc/ssh/sparkc_host_key.pub 2>/dev/null) &&
      read -r kind blob _ <<<"$hostkey" && [[ -n $blob ]]; do
      watch_check
      time_left || fail "$node" "${SPARKC_CONTAINER[$node]} made no ssh host key for mpirun within the timeout"
      sleep 0.3
    done
    name=${SPARKC_MPI_HOST[$node],,}
    ((SPARKC_MPI_SSH_PORT == 22)) || name="[$name]:$SPARKC_MPI_SSH_PORT"
    printf '%s %s %s\n' "$name" "$kind" "$blob" \
      | on_node "$SPARKC_HEAD" docker exec -i "${SPARKC_CONTAINER[$SPARKC_HEAD]}" sh -c 'cat >>/root/.ssh/known_hosts' \
      || fail "$SPARKC_HEAD" "could not record ${SPARKC_CONTAINER[$node]}'s ssh host key in ${SPARKC_CONTAINER[$SPARKC_HEAD]} for mpirun"
  done
  for node in "${SPARKC_NODES[@]}"; do
    [[ $node != "$SPARKC_HEAD" ]] || continue
    start=$SECONDS
    until out=$(on_node "$SPARKC_HEAD" docker exec "${SPARKC_CONTAINER[$SPARKC_HEAD]}" ssh -o ConnectTimeout=5 "${SPARKC_MPI_HOST[$node]}" true 2>&1); do
      watch_check
      if ((SECONDS - start >= SPARKC_MPI_SSH_WAIT)) || ! time_left; then
        fail "$node" "node rank ${SPARKC_RANK[$node]} ($node) cannot be reached by mpirun: ssh from the head's container" \
          "to ${SPARKC_MPI_HOST[$node]} port $SPARKC_MPI_SSH_PORT failed (${out##*$'\n'}). Check that the port is open between the" \
          "nodes and that ${SPARKC_CONTAINER[$node]} runs sshd (its log)"
      fi
      sleep 0.5
    done
    log "$node: mpirun reaches node rank ${SPARKC_RANK[$node]} at ${SPARKC_MPI_HOST[$node]}:$SPARKC_MPI_SSH_PORT"
  done
  phase_done
}

# -- phase 5 -----------------------------------------------------------------------------------
# Under Ray the engine is started in the head's container by docker exec, through this wrapper.
# shellcheck disable=SC2016  # expanded by the container's sh
# sparkc-embed SPARKC_ENGINE_WRAPPER node/engine-wrapper.sh

# engine_argv WRAPPER: SPARKC_ARGV, the engine's start under Ray in the head's container through WRAPPER (the
# library's SPARKC_ENGINE_WRAPPER; a dry run shows it by name), with this launch's API port.
engine_argv() {
  SPARKC_ARGV=(docker exec -d "${SPARKC_CONTAINER[$SPARKC_HEAD]}" sh -c "$1" sparkc-engine "${SPARKC_ENGINE_COMMAND[@]}")
  with_api_port "$SPARKC_ENGINE_API_PORT_AT" $((${#SPARKC_ARGV[@]} - ${#SPARKC_ENGINE_COMMAND[@]}))
}

start_engine() {
  if ((${#SPARKC_ENGINE_COMMAND[@]} == 0)); then
    phase engine "the engine is each container's main process; nothing more to start"
    phase_done
    return 0
  fi
  if [[ $SPARKC_BACKEND == mpi ]]; then
    phase engine "$SPARKC_ENGINE on every node by mpirun in the head's container"
  else
    phase engine "$SPARKC_ENGINE on the head through Ray"
  fi
  SPARKC_FAILED_NODE=$SPARKC_HEAD
  if dry_run; then  # the wrapper by name: it is the library's, the same for every deployment
    engine_argv "<the engine wrapper>"
    dry_print "$SPARKC_HEAD" "${SPARKC_ARGV[@]}" >&3
  else
    engine_argv "$SPARKC_ENGINE_WRAPPER"
    on_node "$SPARKC_HEAD" "${SPARKC_ARGV[@]}" >/dev/null || fail "$SPARKC_HEAD" "could not start the engine in ${SPARKC_CONTAINER[$SPARKC_HEAD]}"
  fi
  SPARKC_ENGINE_STARTED=0
  if ! dry_run; then
    SPARKC_ENGINE_STARTED=1
    engine_watch_start
  fi
  SPARKC_FAILED_NODE=""
  phase_done
}

# The engine's exit status once it ended (Ray: it runs by docker exec); fails while it runs, or
# where the engine is the container's main process (then the container's state tells).
engine_exit_status() {
  ((${#SPARKC_ENGINE_COMMAND[@]})) || return 1
  on_node "$SPARKC_HEAD" docker exec "${SPARKC_CONTAINER[$SPARKC_HEAD]}" cat /tmp/sparkc-engine.exit 2>/dev/null
}

# -- phase 6 -----------------------------------------------------------------------------------
wait_ready() {
  phase readiness "$SPARKC_PROBE_URL: port, /health, /v1/models, one-token completion; every container alive"
  if dry_run; then
    printf "[%s] curl %s/health; curl %s/v1/models; curl -d '%s' %s/v1/completions\n" \
      "$SPARKC_HEAD" "$SPARKC_PROBE_URL" "$SPARKC_PROBE_URL" "$SPARKC_PROBE_BODY" "$SPARKC_PROBE_URL"
    phase_done
    return 0
  fi
  local stage="" want
  while :; do
    watch_probe readiness_stage || true
    want=$(cat "$SPARKC_SCRATCH/probe")
    if [[ $want == ready ]]; then
      # The probes took a while: a node that died meanwhile must not be reported ready.
      watch_check
      engine_still_running
      break
    fi
    if [[ $want == "elsewhere "* ]]; then
      fail "$SPARKC_HEAD" "the engine answers on port ${want#elsewhere }, not on port $SPARKC_API_PORT where this launch waits for" \
        "it: the image's entrypoint chose its own port (an image re-pulled under the same tag may read other" \
        "variables). Read its entrypoint, re-profile the image (sparkc profile $SPARKC_IMAGE) and compile again, or use" \
        "container.entrypoint: bypass"
    fi
    if [[ $want != "$stage" ]]; then
      stage=$want
      log "waiting for $want ($((SPARKC_DEADLINE - SECONDS))s left)"
    fi
    time_left || fail "$SPARKC_HEAD" "not ready within ${SPARKC_TIMEOUT}s: still waiting for $want"
    watch_pause 0.1
  done
  phase_done
}

# What the endpoint still lacks, or "ready" (runs in the background under watch_probe); "elsewhere PORT":
# the engine serves on PORT instead.
readiness_stage() {
  local other
  if ! port_in_use "$SPARKC_PROBE_HOST" "$SPARKC_API_PORT"; then
    if other=$(engine_port_elsewhere) && [[ -n $other ]]; then
      echo "elsewhere $other"
      return 0
    fi
    echo "port $SPARKC_API_PORT"
  elif ! probe_health; then
    echo /health
  elif ! probe_models; then
    echo "/v1/models naming $SPARKC_SERVED_MODEL"
  elif ! first_token_probe; then
    echo "a completion"
  else
    echo ready
  fi
}

# The readiness completion (probe_completion's request), keeping its time to first byte for last-launch.txt:
# the answer of a one-token request, its time to first token.
first_token_probe() {
  local took
  took=$(api_curl -fsS --max-time 60 -H 'Content-Type: application/json' -d "$SPARKC_PROBE_BODY" -o /dev/null \
    -w '%{time_starttransfer}' "$SPARKC_PROBE_URL/v1/completions" 2>/dev/null) || return 1
  printf '%s\n' "$took" >"$SPARKC_SCRATCH/first-token"
}

# The TCP ports the head container's own processes listen on, as hexadecimal numbers: /proc/net/tcp of the
# host's network (--network host), matched by socket inode with the container's processes (its own pid
# namespace). Needs only sh, ls, sed and awk in the image, no ss and no root on the host.
# shellcheck disable=SC2016  # for the container's sh
readonly SPARKC_LISTEN_PORTS_SH='inodes=$(ls -l /proc/[0-9]*/fd 2>/dev/null | sed -n "s/.*socket:\[\([0-9]*\)\].*/\1/p" | sort -u | tr "\n" " ")
cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | awk -v inodes=" $inodes" "\$4 == \"0A\" && index(inodes, \" \" \$10 \" \") { sub(/.*:/, \"\", \$2); print \$2 }"'
readonly SPARKC_ELSEWHERE_EVERY=3  # seconds between two looks while the API port stays closed

# A port, other than the one this launch waits on, where the head container's engine answers the API's
# /v1/models: the engine came up on a port of its own choosing. Looks at most every SPARKC_ELSEWHERE_EVERY seconds.
engine_port_elsewhere() {
  local stamp=$SPARKC_SCRATCH/elsewhere.at hex port
  [[ -s $stamp ]] && ((SECONDS - $(<"$stamp") < SPARKC_ELSEWHERE_EVERY)) && return 0
  echo "$SECONDS" >"$stamp"
  for hex in $(on_node "$SPARKC_HEAD" docker exec "${SPARKC_CONTAINER[$SPARKC_HEAD]}" sh -c "$SPARKC_LISTEN_PORTS_SH" 2>/dev/null | sort -u); do
    [[ $hex =~ ^[0-9A-Fa-f]{1,4}$ ]] || continue
    port=$((16#$hex))
    ((port != SPARKC_API_PORT)) || continue
    if api_curl -fsS --max-time 2 "http://$SPARKC_PROBE_URL_HOST:$port/v1/models" 2>/dev/null | grep -q '"data"'; then
      echo "$port"
      return 0
    fi
  done
}

# -- phase 7 -----------------------------------------------------------------------------------
# NCCL's INFO lines say which transport it really uses; a node with RDMA devices on sockets runs at
# about 3 GB/s and says nothing else about it. (In Ray mode the workers' lines reach the head's log.)
check_fabric() {
  phase fabric "NCCL's transport on every node"
  local node lines socket
  for node in "${SPARKC_NODES[@]}"; do
    [[ -n ${SPARKC_NCCL_WANT[$node]} ]] || continue
    if dry_run; then
      printf "[%s] docker logs %s | grep -E 'via NET/|Using network'\n" "$node" "${SPARKC_CONTAINER[$node]}" >&3
      continue
    fi
    lines=$(on_node "$node" docker logs "${SPARKC_CONTAINER[$node]}" 2>&1 | grep -E 'via NET/|Using network' || true)
    if [[ -z $lines ]]; then
      warn "$node: no NCCL transport lines in its log (NCCL_DEBUG overridden?); the fabric was not checked"
      continue
    fi
    socket=$(grep -m1 -E 'via NET/Socket|Using network Socket' <<<"$lines" || true)
    if [[ -n $socket && ${SPARKC_NCCL_WANT[$node]} == IB ]]; then
      fail "$node" "NCCL fell back to sockets (about 3 GB/s instead of RDMA): '${socket##*NCCL INFO }'." \
        "Check NCCL_IB_HCA against ibdev2netdev on every node, that the containers see /dev/infiniband" \
        "and that NCCL_IB_DISABLE is 0; set launch.nccl_check: false to accept it"
    fi
    log "$node: NCCL channels $(grep -m1 -oE 'via NET/[A-Za-z]+' <<<"$lines" || grep -m1 -oE 'Using network [A-Za-z]+' <<<"$lines")"
  done
  phase_done
}

# What the spec's launch.timeout could be. At most 10 digits: bash's arithmetic would wrap a longer
# number before comparing it.
timeout_in_bounds() {
  [[ $1 =~ ^[1-9][0-9]{0,9}$ ]] || return 1
  (($1 >= SPARKC_TIMEOUT_MIN && $1 <= SPARKC_TIMEOUT_MAX))
}

launch_main() {
  read_secrets
  SPARKC_TIMEOUT=$SPARKC_DEFAULT_TIMEOUT
  if ((SPARKC_HAS_PLANES)); then planes_enable; fi
  if ((SPARKC_IS_RING)); then ring_enable; fi
  if ((SPARKC_HAS_FABRIC_ADDRESSES)); then addresses_enable; fi
  while (($#)); do
    case $1 in
      --dry-run) SPARKC_DRY_RUN=1 ;;
      --skip-preflight) SPARKC_SKIP_PREFLIGHT=1 ;;
      --preflight-only) SPARKC_PREFLIGHT_ONLY=1 ;;
      --no-probe) SPARKC_PROBE=0 ;;
      --yes) SPARKC_REPLACE=1 ;;
      --timeout)
        timeout_in_bounds "${2:-}" || usage_error "--timeout needs whole seconds from $SPARKC_TIMEOUT_MIN to $SPARKC_TIMEOUT_MAX"
        SPARKC_TIMEOUT=$2
        shift
        ;;
      --env)
        (($# > 1)) || usage_error "--env needs 'NAME=VALUE'"
        add_extra_env "$2"
        shift
        ;;
      --port)
        (($# > 1)) || usage_error "--port needs a port number from 1 to 65535"
        set_port_override "$2"
        shift
        ;;
      -h | --help) launch_usage; exit 0 ;;
      *) echo "launch-cluster.sh: unknown option: $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
  done
  dry_run || ssh_mux_start  # after the options: a dry run opens no connection
  check_extra_env
  # The record and the failure logs go beside this script: a link there is refused before any node is touched.
  dry_run || { own_path "$SPARKC_SCRIPT_DIR/last-launch.txt" && own_path "$SPARKC_SCRIPT_DIR/logs" folder; } || exit 1
  SPARKC_DEADLINE=$((SECONDS + SPARKC_TIMEOUT))
  SPARKC_SCRATCH=$(mktemp -d)
  trap 'on_error $? $LINENO' ERR
  trap on_interrupt INT TERM
  log "launching $SPARKC_DEPLOYMENT: ${#SPARKC_NODES[@]} node(s), head $SPARKC_HEAD, image $SPARKC_IMAGE, timeout ${SPARKC_TIMEOUT}s"
  dry_run && log "dry run: printing commands, touching nothing"
  [[ -z $SPARKC_PORT_OVERRIDE ]] || log "API port $SPARKC_API_PORT for this launch (--port; compiled: $SPARKC_COMPILED_API_PORT)"
  ((SPARKC_PREFLIGHT_ONLY)) && ! dry_run && preflight_only
  check_secrets
  if ((SPARKC_SKIP_PREFLIGHT)); then
    log "== preflight skipped"
  else
    preflight
  fi
  clear_old
  drop_page_caches
  run_host_hooks
  if ((SPARKC_HAS_HOOKS)); then stage_patches; fi
  ask_homes
  probe_fabric
  record_launch starting
  start_containers
  if [[ $SPARKC_BACKEND == ray ]]; then
    form_ray
  elif [[ $SPARKC_BACKEND == mpi ]]; then
    form_mpi
  fi
  start_engine
  wait_ready
  if ((SPARKC_NCCL_CHECK)); then
    check_fabric
  fi
  dry_run && { log "dry run complete"; return 0; }
  SPARKC_READY_AFTER=$SECONDS
  log "READY in ${SECONDS}s: $SPARKC_SERVED_MODEL at $SPARKC_ENDPOINT/v1"
  record_launch ready
  local auth=""
  if [[ -n $SPARKC_API_KEY_VAR ]]; then
    auth=" -H \"Authorization: Bearer \$$SPARKC_API_KEY_VAR\""  # the key stays in the variable: not printed
  elif [[ -n $SPARKC_API_KEY_GIVEN ]]; then
    auth=" -H 'Authorization: Bearer <the key after --api-key in the spec>'"
  fi
  printf 'Try it:\n  curl %s/v1/chat/completions%s -H %q -d %q\n' "$SPARKC_ENDPOINT" "$auth" 'Content-Type: application/json' \
    "{\"model\": $SPARKC_SERVED_MODEL_JSON, \"messages\": [{\"role\": \"user\", \"content\": \"Hello\"}], \"max_tokens\": 32}"
}
