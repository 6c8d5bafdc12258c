status_usage() {
  cat <<'USAGE'
Usage: status.sh [--format text|json] [--all]

Shows each node's container, Ray's view of the cluster (Ray backend) and the endpoint's health,
on the API port of the last launch that started containers, even one that failed
(launch-cluster.sh --port, as last-launch.txt records it), and whether that launch failed.
Then what the engine is doing, from its own Prometheus metrics on that port: requests running
and waiting, the KV cache's share in use, prompt and generated tokens, and the tokens a second
since the last call of status.sh (kept in status-metrics.txt beside it). Last, the last launch's
timeline: when each phase started and how long it took, the time to ready and the readiness
request's time to first token.
Exit status: 0 every container running and the endpoint healthy, 1 otherwise, 2 usage.

--format json: the same as one JSON object on stdout (nodes, containers, health, metrics, rates,
timeline), for scripts; messages go to stderr. text (the default): as above.

--all: every sparkc deployment with a container on this deployment's nodes (by the containers'
labels; sparkc need not be installed): its containers' state per node, its endpoint and whether
that answers /health. Exit status: 0, or 1 when a node cannot be reached.
USAGE
}

status_main() {
  local format=text
  while (($#)); do
    case $1 in
      --all) [[ $# == 1 ]] || { echo "status.sh: --all takes nothing after it" >&2; exit 2; }
        [[ $format == text ]] || { echo "status.sh: --all prints text only" >&2; exit 2; }
        ssh_mux_start
        status_all
        return ;;
      --format)
        case ${2-} in
          text | json) format=$2 ;;
          *) echo "status.sh: --format takes text or json" >&2; exit 2 ;;
        esac
        shift ;;
      -h | --help) status_usage; exit 0 ;;
      *) echo "status.sh: unknown option: $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
  done
  local json_out
  if [[ $format == json ]]; then
    exec {json_out}>&1 1>&2  # the object alone on stdout; every message on stderr
  fi
  dry_run || ssh_mux_start  # after the options: a dry run opens no connection
  local node state healthy=1 out problem endpoint node_json="" ray=""
  use_api_port "$(last_launch_port)"
  ((SPARKC_API_PORT == SPARKC_COMPILED_API_PORT)) || log "API port $SPARKC_API_PORT, from the last launch (launch-cluster.sh --port)"
  local last
  last=$(last_launch_field state)
  case $last in
    failed) warn "the last launch ($(last_launch_field launched)) failed; its containers are kept for inspection" ;;
    starting) log "the last launch ($(last_launch_field launched)) has started its containers and not (yet) reported ready" ;;
  esac
  for node in "${SPARKC_NODES[@]}"; do
    if ! is_local "$node" && ! on_node "$node" true 2>/dev/null; then
      state="UNREACHABLE (${SPARKC_TARGET[$node]})"
      healthy=0
    else
      state=$(printable "$(container_state "$node")")
      [[ $state == running ]] || healthy=0
    fi
    node_json+="${node_json:+,}{\"name\":$(json_string "$node"),\"container\":$(json_string "${SPARKC_CONTAINER[$node]}"),\"state\":$(json_string "$state")}"
    [[ $format == json ]] || printf '%-20s %-40s %s\n' "$node" "${SPARKC_CONTAINER[$node]}" "$state"
  done
  if [[ $SPARKC_BACKEND == ray ]]; then
    if out=$(ray_check 2>&1); then
      ray=$(printable "${out##*$'\n'}")
    else
      ray="Ray NOT READY: $(printable "${out##*$'\n'}")"
      healthy=0
    fi
    [[ $format == json ]] || printf '%s\n' "$ray"
  fi
  if [[ -n $SPARKC_API_KEY_VAR && -z ${!SPARKC_API_KEY_VAR-} ]]; then
    warn "$SPARKC_API_KEY_VAR is not set here: the engine answers 401 on /v1 without it; export it as for the launch"
  fi
  problem=$(api_key_problem)
  [[ -z $problem ]] || warn "$problem (the probes below are not sent)"
  if ! probe_health; then
    endpoint="/health does not answer"
  elif ! probe_models; then
    endpoint="/v1/models does not list $SPARKC_SERVED_MODEL"
  elif ! probe_completion; then
    # A wedged engine can still answer /health and /v1/models.
    endpoint="lists $SPARKC_SERVED_MODEL but does not complete a one-token request"
  else
    endpoint="healthy, serving $SPARKC_SERVED_MODEL"
  fi
  [[ $endpoint == healthy,* ]] || healthy=0
  if [[ $format == json ]]; then
    status_json "$healthy" "$ray" "$endpoint" "$node_json" >&"$json_out"
  else
    printf 'endpoint %s: %s\n' "$SPARKC_ENDPOINT" "$endpoint"
    status_engine_text
    status_timeline_text
  fi
  if ((healthy)); then
    log "$SPARKC_DEPLOYMENT is healthy"
    return 0
  fi
  log "$SPARKC_DEPLOYMENT is NOT healthy"
  return 1
}

# What the engine is doing, from its /metrics, and the token rates since the last call.
status_engine_text() {
  local parsed rates engines kv
  if [[ -z $SPARKC_METRICS_RUNNING ]]; then
    printf 'engine: %s\n' "$SPARKC_METRICS_NOTE"
    return 0
  fi
  if ! parsed=$(metrics_fetch) || [[ -z $parsed ]]; then
    printf 'engine: %s/metrics gives no metrics of %s%s\n' "$SPARKC_PROBE_URL" "$SPARKC_ENGINE" "${SPARKC_METRICS_NOTE:+ ($SPARKC_METRICS_NOTE)}"
    return 0
  fi
  engines=$(metrics_value engines "$parsed")
  kv=$(LC_ALL=C awk -v kv="$(metrics_value kv "$parsed")" 'BEGIN { if (kv == "") print "?"; else printf "%.1f%%", kv * 100 }')
  printf 'engine: %s running, %s waiting, KV cache %s in use' "$(metrics_shown running "$parsed")" \
    "$(metrics_shown waiting "$parsed")" "$kv"
  if ((${engines:-1} > 1)); then printf ' (%s engines together)' "$engines"; fi
  printf '\ntokens: %s prompt, %s generated\n' "$(metrics_shown prompt "$parsed")" \
    "$(metrics_shown generation "$parsed")"
  if rates=$(metrics_rates "$parsed" 2>&1); then
    printf 'rate: %s prompt, %s generated tokens/s over the last %ss\n' "$(metrics_value prompt_rate "$rates")" \
      "$(metrics_value generation_rate "$rates")" "$(metrics_value seconds "$rates")"
  else
    printf 'rate: %s\n' "$rates"
  fi
}

# The last launch's timeline, from last-launch.txt.
status_timeline_text() {
  local phases ready first name start took
  phases=$(launch_phases)
  ready=$(launch_number ready_after) first=$(launch_number first_token)
  [[ -n $phases || -n $ready ]] || return 0
  printf 'last launch %s (%s):%s%s\n' "$(safe_word "$(last_launch_field launched)")" "$(safe_word "$(last_launch_field state)")" \
    "${ready:+ ready in ${ready}s}" "${first:+, first token in ${first}s}"
  while read -r name start took; do
    [[ -n $name ]] && printf '  %-12s at %5ss  took %5ss\n' "$name" "$start" "$took"
  done <<<"$phases"
}

# status.sh --format json: everything above as one object.
status_json() { # HEALTHY RAY ENDPOINT NODES (their JSON objects, comma-separated)
  local healthy=$1 ray=$2 endpoint=$3 node_json=$4 parsed="" rates="" key value metrics=null rate=null note=""
  if [[ -z $SPARKC_METRICS_RUNNING ]]; then
    note=$SPARKC_METRICS_NOTE
  elif ! parsed=$(metrics_fetch) || [[ -z $parsed ]]; then
    note="$SPARKC_PROBE_URL/metrics gives no metrics of $SPARKC_ENGINE${SPARKC_METRICS_NOTE:+ ($SPARKC_METRICS_NOTE)}"
    parsed=""
  else
    metrics=""
    while read -r key value; do
      metrics+="${metrics:+,}\"$key\":$value"
    done <<<"$parsed"
    metrics="{$metrics}"
    if rates=$(metrics_rates "$parsed" 2>&1); then
      rate=""
      while read -r key value; do
        rate+="${rate:+,}\"$key\":$value"
      done <<<"$rates"
      rate="{$rate}"
    else
      note=$rates
    fi
  fi
  printf '{"deployment":%s,"engine":%s,"healthy":%s,"endpoint":%s,"model":%s,"health":%s,' \
    "$(json_string "$SPARKC_DEPLOYMENT")" "$(json_string "$SPARKC_ENGINE")" "$( ((healthy)) && echo true || echo false)" \
    "$(json_string "$SPARKC_ENDPOINT")" "$SPARKC_SERVED_MODEL_JSON" "$(json_string "$endpoint")"
  printf '"nodes":[%s],"ray":%s,"metrics":%s,"rates":%s,"metrics_note":%s,"timeline":%s}\n' "$node_json" \
    "$([[ $SPARKC_BACKEND == ray ]] && json_string "$ray" || echo null)" "$metrics" "$rate" "$(json_string "$note")" \
    "$(status_timeline_json)"
}

status_timeline_json() {
  local phases ready first name start took list=""
  phases=$(launch_phases)
  ready=$(launch_number ready_after) first=$(launch_number first_token)
  if [[ -z $phases && -z $ready ]]; then
    echo null
    return 0
  fi
  while read -r name start took; do
    [[ -n $name ]] && list+="${list:+,}{\"phase\":\"$name\",\"start_s\":$start,\"seconds\":$took}"
  done <<<"$phases"
  printf '{"launched":%s,"state":%s,"ready_after_s":%s,"first_token_s":%s,"phases":[%s]}\n' \
    "$(json_string "$(last_launch_field launched)")" "$(json_string "$(last_launch_field state)")" \
    "${ready:-null}" "${first:-null}" "$list"
}

# status.sh --all: every sparkc deployment on these nodes, one line each, from its containers' labels.
readonly SPARKC_STATUS_ALL_FORMAT='{{.Label "sparkc.deployment"}} {{.State}} {{or (.Label "sparkc.endpoint-host") "-"}} {{or (.Label "sparkc.api-port") "-"}}'
status_all() {
  local node name state host port out rc=0 order=() health
  declare -A where=() states=() endpoint=()
  for node in "${SPARKC_NODES[@]}"; do
    if ! out=$(on_node "$node" docker ps -a --filter label=sparkc.deployment --format "$SPARKC_STATUS_ALL_FORMAT" 2>&1); then
      warn "$node: cannot list its containers: ${out//$'\n'/ }"
      rc=1
      continue
    fi
    while read -r name state host port; do
      [[ -n $name ]] || continue
      name=$(safe_word "$name") state=$(safe_word "$state")  # labels are anyone's text
      [[ -n ${where[$name]+x} ]] || order+=("$name")
      where[$name]+="${where[$name]:+ }$node" states[$name]+="${states[$name]:+ }$state"
      # Probed only where the host is a host name or an address and the port 1-65535 in ASCII digits:
      # a label such as 8009/[1-1000000] must not become a million URLs (curl -g reads no [] either).
      if [[ -n $host && $host != *[!A-Za-z0-9.:-]* && $port =~ ^[0123456789]{1,5}$ ]] \
        && ((10#$port >= 1 && 10#$port <= 65535)); then
        endpoint[$name]="http://$host:$((10#$port))"
      elif [[ $host != - || $port != - ]]; then
        endpoint[$name]="?"  # a label sparkc did not write
      fi
    done <<<"$out"
  done
  printf '%-24s %-10s %-28s %s\n' DEPLOYMENT STATE NODES ENDPOINT
  for name in "${order[@]}"; do
    # One state where every node agrees (running, exited, created), else each state seen: running,exited.
    state=$(tr ' ' '\n' <<<"${states[$name]}" | sort -u | paste -sd, -)
    health=""
    if [[ ${endpoint[$name]-?} != "?" ]]; then
      if curl -gfsS --max-time 5 -o /dev/null "${endpoint[$name]}/health" 2>/dev/null; then
        health=" healthy"
      else
        health=" not answering"
      fi
    fi
    printf '%-24s %-10s %-28s %s\n' "$name" "$state" "${where[$name]}" "${endpoint[$name]:--}$health"
  done
  ((${#order[@]})) || log "no sparkc deployment has a container on ${SPARKC_NODES[*]}"
  return "$rc"
}
