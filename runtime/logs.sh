logs_usage() {
  cat <<'USAGE'
Usage: logs.sh [--since WHEN] [--tail LINES] [--out DIR] | [--since WHEN] -f

Without -f: copies every node's container log and state into DIR (default: logs/<time>/ beside
this script) and prints the folder. With -f (--follow): follows the head container's log.
--since WHEN: only what was logged since WHEN, as docker logs reads it: a duration back from now
(10m, 1h30m, 45s), a date or time (2026-12-01, 2026-12-01T22:00:00Z), or Unix seconds.
Each container keeps a bounded log (docker's json-file driver; container.logs in the spec), so the
oldest lines of a long run may be gone.
Exit status: 0 done, 1 some node's log could not be read, 2 usage.
USAGE
}

logs_main() {
  local follow=0 tail="" dir="" since=""
  while (($#)); do
    case $1 in
      -f | --follow) follow=1 ;;
      --tail)
        [[ ${2:-} =~ ^[0-9]+$ ]] || { echo "logs.sh: --tail needs a number" >&2; exit 2; }
        tail=$2
        shift
        ;;
      --since)
        valid_since "${2:-}" || {
          echo "logs.sh: --since needs a duration (10m, 1h30m), a date or time (2026-12-01T22:00:00Z) or Unix seconds" >&2
          exit 2
        }
        since=$2
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
  dry_run || ssh_mux_start  # after the options: a dry run opens no connection
  if ((follow)); then
    ssh_mux_stop  # exec ends this shell without its EXIT trap
    # Without --since, the last lines for context; with it, everything since then.
    local follow_args=(--follow --tail "${tail:-$([[ -n $since ]] && echo all || echo 200)}")
    [[ -z $since ]] || follow_args+=(--since "$since")
    exec docker logs "${follow_args[@]}" "${SPARKC_CONTAINER[$SPARKC_HEAD]}"
  fi
  if [[ -z $dir ]]; then
    new_folder "$SPARKC_SCRIPT_DIR/logs" "$(date -u +%Y%m%dT%H%M%SZ)" || exit 1
    dir=$SPARKC_NEW_FOLDER
  fi
  collect_logs "$dir" "${tail:-all}" "$since" || exit 1
  log "logs of ${#SPARKC_NODES[@]} node(s) in $dir"
  if grep -l -e '^(no logs' -e '^missing or unreachable' "$dir"/*.log "$dir"/*.state >/dev/null 2>&1; then
    warn "some nodes' logs could not be read; see the files in $dir"
    return 1
  fi
}

# What docker logs --since takes: a Go duration, Unix seconds, or an RFC 3339 date or time. Checked here so
# that a typing error is a usage error before any node is asked, not one error per node.
valid_since() {
  local value=$1
  [[ $value =~ ^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$ ]] && return 0
  [[ $value =~ ^[0-9]+(\.[0-9]{1,9})?$ ]] && return 0
  [[ $value =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}(T[0-9]{2}(:[0-9]{2}(:[0-9]{2}(\.[0-9]{1,9})?)?)?(Z|[+-][0-9]{2}:[0-9]{2})?)?$ ]]
}
