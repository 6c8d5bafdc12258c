status_usage() {
  cat <<'USAGE'
Usage: status.sh [--all]

Shows each node's container, Ray's view of the cluster (Ray backend) and the endpoint's health,
on the API port of the last launch that started containers, even one that failed
(launch-cluster.sh --port, as last-launch.txt records it), and whether that launch failed.
Exit status: 0 every container running and the endpoint healthy, 1 otherwise, 2 usage.

--all: every sparkc deployment with a container on this deployment's nodes (by the containers'
labels; sparkc need not be installed): its containers' state per node, its endpoint and whether
that answers /health. Exit status: 0, or 1 when a node cannot be reached.
USAGE
}

status_main() {
  case ${1:-} in
    "") ;;
    --all) [[ $# == 1 ]] || { echo "status.sh: --all takes nothing after it" >&2; exit 2; }
      ssh_mux_start
      status_all
      return ;;
    -h | --help) status_usage; exit 0 ;;
    *) echo "status.sh: unknown option: $1 (see --help)" >&2; exit 2 ;;
  esac
  dry_run || ssh_mux_start  # after the options: a dry run opens no connection
  local node state healthy=1 out problem
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
      printf '%-20s %-40s %s\n' "$node" "${SPARKC_CONTAINER[$node]}" "UNREACHABLE (${SPARKC_TARGET[$node]})"
      healthy=0
      continue
    fi
    state=$(container_state "$node")
    printf '%-20s %-40s %s\n' "$node" "${SPARKC_CONTAINER[$node]}" "$(printable "$state")"
    [[ $state == running ]] || healthy=0
  done
  if [[ $SPARKC_BACKEND == ray ]]; then
    if out=$(ray_check 2>&1); then
      printf '%s\n' "$(printable "${out##*$'\n'}")"
    else
      printf 'Ray NOT READY: %s\n' "$(printable "${out##*$'\n'}")"
      healthy=0
    fi
  fi
  if [[ -n $SPARKC_API_KEY_VAR && -z ${!SPARKC_API_KEY_VAR-} ]]; then
    warn "$SPARKC_API_KEY_VAR is not set here: the engine answers 401 on /v1 without it; export it as for the launch"
  fi
  problem=$(api_key_problem)
  [[ -z $problem ]] || warn "$problem (the probes below are not sent)"
  if ! probe_health; then
    printf 'endpoint %s: /health does not answer\n' "$SPARKC_ENDPOINT"
    healthy=0
  elif ! probe_models; then
    printf 'endpoint %s: /v1/models does not list %s\n' "$SPARKC_ENDPOINT" "$SPARKC_SERVED_MODEL"
    healthy=0
  elif ! probe_completion; then
    # A wedged engine can still answer /health and /v1/models.
    printf 'endpoint %s: lists %s but does not complete a one-token request\n' "$SPARKC_ENDPOINT" "$SPARKC_SERVED_MODEL"
    healthy=0
  else
    printf 'endpoint %s: healthy, serving %s\n' "$SPARKC_ENDPOINT" "$SPARKC_SERVED_MODEL"
  fi
  if ((healthy)); then
    log "$SPARKC_DEPLOYMENT is healthy"
    return 0
  fi
  log "$SPARKC_DEPLOYMENT is NOT healthy"
  return 1
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
