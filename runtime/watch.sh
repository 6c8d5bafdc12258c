watch_usage() {
  cat <<'USAGE'
Usage: watch.sh [--interval S] [--deadline S] [--max-restarts N] [--window S] [--backoff S]
                [--once] [--dry-run]

Keeps the deployment serving. Every --interval seconds (default 30) it checks each node's
container (and, with Ray, that the Ray cluster is whole), the head's /health and a one-token
generation that must answer within --deadline seconds (default 60). A generation that does not
answer in time while /health still answers is a wedged engine.

On a failure it says what failed on which node, keeps every node's log under logs/<UTC time>/
beside this script, runs the spec's watch.on_failure command (if any), then restarts the
deployment: stop-cluster.sh, then launch-cluster.sh --yes (on the port of the last launch). A
node that does not answer over ssh is waited for, without spending a restart, until it is back.
At most --max-restarts restarts (default 3) within --window seconds (default 3600), each after a
back-off that doubles from --backoff seconds (default 30; the first restart waits none); past
that budget it stops, says so, runs watch.on_failure once more and exits 1.

  --once     one round, no restart: exit 0 healthy, 1 not (for cron, CI, load-balancer probes)
  --dry-run  print what each round checks and what a failure would run; touch nothing
  -h, --help this text

Exit status: 0 healthy (--once), 1 not healthy (--once) or out of restarts, 2 usage.
USAGE
}

# Defaults, and why. A launch on Sparks takes minutes (the weights load from disk, the caches are warm),
# so a deployment that failed three times within an hour has a fault a restart does not mend (a bad
# node, a full disk, an engine bug); restarting further would only churn logs and hide it. The first
# restart of a burst follows at once (the service is down); each one after waits twice as long.
SPARKC_WATCH_INTERVAL=30
SPARKC_WATCH_DEADLINE=60
SPARKC_WATCH_MAX_RESTARTS=3
SPARKC_WATCH_WINDOW=3600
SPARKC_WATCH_BACKOFF=30
# Every command on a node gets this long (the ssh connection included) before it counts as not answering.
SPARKC_WATCH_NODE_TIMEOUT=30
# watch.on_failure runs at most this long.
SPARKC_WATCH_HOOK_TIMEOUT=60
# stop-cluster.sh stops each container within 30 s, node by node: this bounds a node that hangs.
SPARKC_WATCH_STOP_TIMEOUT=600

# The failure a round found: its kind (wedge, container, health, ray), the node, and every problem in words.
SPARKC_WATCH_KIND=""
SPARKC_WATCH_NODE=""
SPARKC_WATCH_TEXT=""
SPARKC_WATCH_UNREACHABLE=()

watch_main() {
  local once=0 value
  while (($#)); do
    case $1 in
      --interval | --deadline | --max-restarts | --window | --backoff)
        value=${2:-}
        [[ $value =~ ^[0-9]{1,7}$ ]] || { echo "watch.sh: $1 needs whole seconds (a count for --max-restarts)" >&2; exit 2; }
        case $1 in
          --interval) SPARKC_WATCH_INTERVAL=$((10#$value)) ;;
          --deadline) SPARKC_WATCH_DEADLINE=$((10#$value)) ;;
          --max-restarts) SPARKC_WATCH_MAX_RESTARTS=$((10#$value)) ;;
          --window) SPARKC_WATCH_WINDOW=$((10#$value)) ;;
          --backoff) SPARKC_WATCH_BACKOFF=$((10#$value)) ;;
        esac
        shift
        ;;
      --once) once=1 ;;
      --dry-run) SPARKC_DRY_RUN=1 ;;
      -h | --help) watch_usage; exit 0 ;;
      *) echo "watch.sh: unknown option: $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
  done
  ((SPARKC_WATCH_INTERVAL >= 1 && SPARKC_WATCH_DEADLINE >= 1)) \
    || { echo "watch.sh: --interval and --deadline need at least 1 second" >&2; exit 2; }
  if dry_run; then
    watch_dry_run
    return 0
  fi
  SPARKC_NODE_TIMEOUT=$SPARKC_WATCH_NODE_TIMEOUT  # every on_node below is bounded
  ssh_mux_start
  if ((once)); then
    watch_round && { log "$SPARKC_DEPLOYMENT is healthy"; return 0; }
    watch_report
    return 1
  fi
  watch_loop
}

watch_loop() {
  local restarts=() healthy_said=0 now kept value
  log "watching $SPARKC_DEPLOYMENT every ${SPARKC_WATCH_INTERVAL}s (a generation's deadline ${SPARKC_WATCH_DEADLINE}s;" \
    "at most $SPARKC_WATCH_MAX_RESTARTS restart(s) within ${SPARKC_WATCH_WINDOW}s)"
  while :; do
    if watch_launch_under_way; then
      healthy_said=0
      sleep "$SPARKC_WATCH_INTERVAL"
      continue
    fi
    if watch_round; then
      ((healthy_said)) || log "$SPARKC_DEPLOYMENT is healthy"
      healthy_said=1
      sleep "$SPARKC_WATCH_INTERVAL"
      continue
    fi
    healthy_said=0
    watch_report
    watch_keep_logs
    watch_on_failure "$SPARKC_WATCH_KIND" "$SPARKC_WATCH_NODE" "$SPARKC_WATCH_TEXT"
    watch_wait_for_nodes
    # The restarts of the last --window seconds; past the budget, stop trying.
    now=$SECONDS
    kept=()
    for value in "${restarts[@]}"; do
      if ((now - value < SPARKC_WATCH_WINDOW)); then kept+=("$value"); fi
    done
    restarts=("${kept[@]}")
    if ((${#restarts[@]} >= SPARKC_WATCH_MAX_RESTARTS)); then
      local text="$SPARKC_DEPLOYMENT is still failing after ${#restarts[@]} restart(s) within ${SPARKC_WATCH_WINDOW}s"
      text+=" (the last failure: $SPARKC_WATCH_TEXT); watch.sh stops trying: look at the logs under $SPARKC_SCRIPT_DIR/logs"
      warn "$text"
      watch_on_failure budget "$SPARKC_WATCH_NODE" "$text"
      return 1
    fi
    if ((${#restarts[@]})); then
      value=$((SPARKC_WATCH_BACKOFF << (${#restarts[@]} - 1)))
      ((value <= SPARKC_WATCH_WINDOW)) || value=$SPARKC_WATCH_WINDOW
      log "waiting ${value}s before restart $((${#restarts[@]} + 1)) of at most $SPARKC_WATCH_MAX_RESTARTS"
      sleep "$value"
    fi
    restarts+=("$SECONDS")
    watch_restart
  done
}

# One round of checks; 0 healthy, else 1 with the failure in SPARKC_WATCH_KIND, _NODE and _TEXT.
watch_round() {
  SPARKC_WATCH_KIND="" SPARKC_WATCH_NODE="" SPARKC_WATCH_TEXT="" SPARKC_WATCH_UNREACHABLE=()
  local node state out rc code
  use_api_port "$(last_launch_port)"
  for node in "${SPARKC_NODES[@]}"; do
    if ! is_local "$node" && ! on_node "$node" true </dev/null >/dev/null 2>&1; then
      SPARKC_WATCH_UNREACHABLE+=("$node")
      watch_failed container "$node" "$node does not answer over ssh (${SPARKC_TARGET[$node]}): the node is down or unreachable"
      continue
    fi
    state=$(container_state "$node" </dev/null)
    [[ $state == running ]] || watch_failed container "$node" "the container ${SPARKC_CONTAINER[$node]} on $node is $state, not running"
  done
  [[ -z $SPARKC_WATCH_KIND ]] || return 1
  if [[ $SPARKC_BACKEND == ray ]] && ! out=$(ray_check 2>&1 </dev/null); then
    watch_failed ray "$SPARKC_HEAD" "the Ray cluster is not whole: $(printable "${out##*$'\n'}")"
    return 1
  fi
  if ! probe_health; then
    watch_failed health "$SPARKC_HEAD" "the endpoint $SPARKC_ENDPOINT does not answer /health"
    return 1
  fi
  rc=0
  code=$(api_curl -sS -o /dev/null -w '%{http_code}' --max-time "$SPARKC_WATCH_DEADLINE" \
    -H 'Content-Type: application/json' -d "$SPARKC_PROBE_BODY" "$SPARKC_PROBE_URL/v1/completions" 2>/dev/null) || rc=$?
  if ((rc == 28)) && probe_health; then  # 28: curl's "operation timed out"
    watch_failed wedge "$SPARKC_HEAD" "the engine is wedged: /health answers but a one-token generation did not answer" \
      "within $SPARKC_WATCH_DEADLINE s"
  elif ((rc == 28)); then
    watch_failed health "$SPARKC_HEAD" "the endpoint $SPARKC_ENDPOINT stopped answering (a one-token generation and then /health)"
  elif ((rc)) || [[ $code != 200 ]]; then
    watch_failed health "$SPARKC_HEAD" "a one-token generation failed (curl status $rc, HTTP ${code:-none}) although /health answers"
  fi
  [[ -z $SPARKC_WATCH_KIND ]]
}

# Record a problem: the first one's kind and node stand for the round; the text lists them all.
watch_failed() { # KIND NODE WORDS...
  [[ -n $SPARKC_WATCH_KIND ]] || { SPARKC_WATCH_KIND=$1 SPARKC_WATCH_NODE=$2; }
  shift 2
  SPARKC_WATCH_TEXT+="${SPARKC_WATCH_TEXT:+; }$*"
}

watch_report() { warn "$SPARKC_DEPLOYMENT is NOT healthy ($SPARKC_WATCH_KIND on $SPARKC_WATCH_NODE): $SPARKC_WATCH_TEXT"; }

# While the last launch is starting (the systemd unit's, or an operator's) a round would see it half up.
watch_launch_under_way() {
  [[ $(last_launch_field state) == starting ]] || return 1
  local since
  since=$(date -u -d "$(last_launch_field launched)" +%s 2>/dev/null) || return 1
  # A launch ends within its budget; a record older than that was left by a launch that was killed.
  (($(date -u +%s) - since < SPARKC_DEFAULT_TIMEOUT + 60)) || return 1
  log "a launch is under way (since $(last_launch_field launched)); this round waits for it"
}

# The evidence first: every node's log and container state, and what failed, in logs/<UTC time>/.
watch_keep_logs() {
  new_folder "$SPARKC_SCRIPT_DIR/logs" "$(date -u +%Y%m%dT%H%M%SZ)" || return 0
  SPARKC_WATCH_LOGS=$SPARKC_NEW_FOLDER
  collect_logs "$SPARKC_WATCH_LOGS" 500 || true
  printf 'kind=%s\nnode=%s\nreason=%s\n' "$SPARKC_WATCH_KIND" "$SPARKC_WATCH_NODE" "$SPARKC_WATCH_TEXT" \
    | save_file "$SPARKC_WATCH_LOGS/failure.txt" || true
  log "logs of every node kept in $SPARKC_WATCH_LOGS"
}
SPARKC_WATCH_LOGS=""

# watch.on_failure, on the head by sh -c, bounded in time, the failure in its environment (never on a
# command line) and the deployment's secrets not: a notification needs none of them. Its own failure is
# reported and changes nothing else.
watch_on_failure() { # KIND NODE TEXT
  [[ -n $SPARKC_WATCH_ON_FAILURE ]] || return 0
  local status=0 name
  (
    for name in "${SPARKC_SECRETS[@]}" ${SPARKC_API_KEY_VAR:+"$SPARKC_API_KEY_VAR"}; do unset "$name"; done
    export SPARKC_WATCH_KIND=$1 SPARKC_WATCH_NODE=$2 SPARKC_WATCH_FAILURE=$3 SPARKC_WATCH_LOGS SPARKC_DEPLOYMENT
    exec timeout -k 5 "$SPARKC_WATCH_HOOK_TIMEOUT" sh -c "$SPARKC_WATCH_ON_FAILURE" </dev/null
  ) || status=$?
  if ((status == 124)); then
    warn "watch.on_failure did not end within ${SPARKC_WATCH_HOOK_TIMEOUT}s and was stopped"
  elif ((status)); then
    warn "watch.on_failure failed with status $status"
  else
    log "watch.on_failure ran ($1)"
  fi
}

# A node that does not answer over ssh (rebooting, powered off) cannot be restarted onto: wait for it,
# one bounded try a round, and spend no restart meanwhile.
watch_wait_for_nodes() {
  local node said=0
  while ((${#SPARKC_WATCH_UNREACHABLE[@]})); do
    ((said)) || log "waiting for ${SPARKC_WATCH_UNREACHABLE[*]} to answer over ssh before restarting"
    said=1
    sleep "$SPARKC_WATCH_INTERVAL"
    local still=()
    for node in "${SPARKC_WATCH_UNREACHABLE[@]}"; do
      on_node "$node" true </dev/null >/dev/null 2>&1 || still+=("$node")
    done
    SPARKC_WATCH_UNREACHABLE=("${still[@]}")
  done
  ((said == 0)) || log "every node answers over ssh again"
}

# The launch's own words: on the port the last launch used, replacing what a failed start left behind.
watch_launch_words() {
  SPARKC_WATCH_LAUNCH=(bash "$SPARKC_SCRIPT_DIR/launch-cluster.sh" --yes)
  local port
  port=$(last_launch_port)
  ((port == SPARKC_COMPILED_API_PORT)) || SPARKC_WATCH_LAUNCH+=(--port "$port")
}
SPARKC_WATCH_LAUNCH=()

# Stop, then launch again (the engines' caches are warm); each a script beside this one, in its own process.
watch_restart() {
  log "restarting $SPARKC_DEPLOYMENT: stop-cluster.sh, then launch-cluster.sh"
  timeout -k 10 "$SPARKC_WATCH_STOP_TIMEOUT" bash "$SPARKC_SCRIPT_DIR/stop-cluster.sh" </dev/null \
    || warn "stop-cluster.sh did not stop everything; the launch replaces what is left"
  watch_launch_words
  # The launch keeps to its own budget (launch.timeout, its failure logs saved); this bounds a hung one.
  if timeout -k 10 "$((SPARKC_DEFAULT_TIMEOUT + 300))" "${SPARKC_WATCH_LAUNCH[@]}" </dev/null; then
    log "$SPARKC_DEPLOYMENT restarted"
  else
    warn "the launch after the failure did not reach READY (its logs are under $SPARKC_SCRIPT_DIR/logs)"
  fi
}

watch_dry_run() {
  local node
  log "dry run: what each round checks, every ${SPARKC_WATCH_INTERVAL}s, and what a failure runs; nothing is touched"
  use_api_port "$(last_launch_port)"
  for node in "${SPARKC_NODES[@]}"; do
    dry_print "$node" docker inspect --format '{{.State.Status}}' "${SPARKC_CONTAINER[$node]}"
  done
  [[ $SPARKC_BACKEND != ray ]] || dry_print "$SPARKC_HEAD" docker exec "${SPARKC_CONTAINER[$SPARKC_HEAD]}" python3 -c '<the Ray check>'
  dry_print "$SPARKC_HEAD" curl -fsS --max-time 10 "$SPARKC_PROBE_URL/health"
  dry_print "$SPARKC_HEAD" curl -sS --max-time "$SPARKC_WATCH_DEADLINE" -d "$SPARKC_PROBE_BODY" "$SPARKC_PROBE_URL/v1/completions"
  log "on a failure: every node's log into $SPARKC_SCRIPT_DIR/logs/<UTC time>/, then:"
  [[ -z $SPARKC_WATCH_ON_FAILURE ]] || dry_print "$SPARKC_HEAD" timeout "$SPARKC_WATCH_HOOK_TIMEOUT" sh -c "$SPARKC_WATCH_ON_FAILURE"
  watch_launch_words
  dry_print "$SPARKC_HEAD" bash "$SPARKC_SCRIPT_DIR/stop-cluster.sh"
  dry_print "$SPARKC_HEAD" "${SPARKC_WATCH_LAUNCH[@]}"
  log "at most $SPARKC_WATCH_MAX_RESTARTS restart(s) within ${SPARKC_WATCH_WINDOW}s, the back-off doubling from ${SPARKC_WATCH_BACKOFF}s"
}
