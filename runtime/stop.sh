stop_usage() {
  cat <<'USAGE'
Usage: stop-cluster.sh [--dry-run]

Stops and removes this deployment's containers (found by name and label) on every node,
workers first, then the head. Other containers are never touched.
Exit status: 0 all removed, 1 a node could not be reached or a container not removed, 2 usage.
USAGE
}

stop_one() {
  local node=$1 name=${SPARKC_CONTAINER[$1]} label
  if dry_run; then
    sparkc_run "$node" docker stop --time 30 "$name"
    sparkc_run "$node" docker rm "$name"
    return 0
  fi
  if ! is_local "$node" && ! on_node "$node" true 2>/dev/null; then
    warn "$node: unreachable over ssh (${SPARKC_TARGET[$node]}); its container is left as it is"
    return 1
  fi
  if ! label=$(on_node "$node" docker inspect --type container \
    --format '{{index .Config.Labels "sparkc.deployment"}}' "$name" 2>&1); then
    # Only docker's own "no such container" means there is nothing to stop; a daemon that does not
    # answer, or a user who may not use it, leaves the container running.
    if [[ $label == *"No such container"* || $label == *"No such object"* ]]; then
      log "$node: no container $name"
      return 0
    fi
    warn "$node: docker did not answer (${label##*$'\n'}); its container, if any, is left as it is"
    return 1
  fi
  if [[ $label != "$SPARKC_DEPLOYMENT" ]]; then
    warn "$node: $name was not created by deployment $SPARKC_DEPLOYMENT; left alone"
    return 1
  fi
  log "$node: stopping $name"
  on_node "$node" docker stop --time 30 "$name" >/dev/null || true
  on_node "$node" docker rm "$name" >/dev/null || { warn "$node: could not remove $name"; return 1; }
}

stop_main() {
  while (($#)); do
    case $1 in
      --dry-run) SPARKC_DRY_RUN=1 ;;
      -h | --help) stop_usage; exit 0 ;;
      *) echo "stop-cluster.sh: unknown option: $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
  done
  dry_run || ssh_mux_start  # after the options: a dry run opens no connection
  local node status=0
  for node in "${SPARKC_NODES[@]:1}" "$SPARKC_HEAD"; do
    stop_one "$node" || status=1
  done
  if ((status)); then
    warn "some containers of $SPARKC_DEPLOYMENT could not be stopped"
  else
    log "$SPARKC_DEPLOYMENT stopped on every node"
  fi
  return "$status"
}
