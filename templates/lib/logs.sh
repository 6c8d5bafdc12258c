logs_usage() {
  cat <<'USAGE'
Usage: logs.sh [--tail LINES] [--out DIR] | -f

Without -f: copies every node's container log and state into DIR (default: logs/<time>/ beside
this script) and prints the folder. With -f: follows the head container's log.
Exit status: 0 done, 1 some node's log could not be read, 2 usage.
USAGE
}

logs_main() {
  local follow=0 tail=all dir=""
  while (($#)); do
    case $1 in
      -f | --follow) follow=1 ;;
      --tail)
        [[ ${2:-} =~ ^[0-9]+$ ]] || { echo "logs.sh: --tail needs a number" >&2; exit 2; }
        tail=$2
        shift
        ;;
      --out)
        [[ -n ${2:-} ]] || { echo "logs.sh: --out needs a folder" >&2; exit 2; }
        dir=$2
        shift
        ;;
      -h | --help) logs_usage; exit 0 ;;
      *) echo "logs.sh: unknown option: $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
  done
  ((DRY_RUN)) || ssh_mux_start  # after the options: a dry run opens no connection
  if ((follow)); then
    ssh_mux_stop  # exec ends this shell without its EXIT trap
    exec docker logs --follow --tail 200 "${CONTAINER[$HEAD]}"
  fi
  [[ -n $dir ]] || dir="$SCRIPT_DIR/logs/$(date -u +%Y%m%dT%H%M%SZ)"
  collect_logs "$dir" "$tail"
  log "logs of ${#NODES[@]} node(s) in $dir"
  if grep -l -e '^(no logs' -e '^missing or unreachable' "$dir"/*.log "$dir"/*.state >/dev/null 2>&1; then
    warn "some nodes' logs could not be read; see the files in $dir"
    return 1
  fi
}
