service_usage() {
  cat <<USAGE
Usage: install-service.sh [--dry-run] [--user USER] [--uninstall]

Installs systemd/$SPARKC_SERVICE_UNIT and systemd/$SPARKC_WATCH_UNIT (beside this script) on this
node, the head: links this folder at $SPARKC_SERVICE_FOLDER, copies the units into
/etc/systemd/system, each with a drop-in that runs it as USER (default: the user who ran sudo, else
the one running this), and enables them, so that launch-cluster.sh runs once the network and docker
are up after every boot, and watch.sh (the watchdog) once that launch has ended. Start them now with
systemctl start $SPARKC_SERVICE_UNIT $SPARKC_WATCH_UNIT. --uninstall disables and removes both (the
containers stay).
--dry-run prints every step and changes nothing. Needs root (sudo) unless --dry-run.
Exit status: 0 done, 1 a step failed, 2 usage.
USAGE
}

service_main() {
  local user=${SUDO_USER:-} uninstall=0
  while (($#)); do
    case $1 in
      --dry-run) SPARKC_DRY_RUN=1 ;;
      --user)
        [[ ${2:-} =~ ^[a-z_][a-z0-9_.-]*$ ]] \
          || { echo "install-service.sh: --user needs a user name (lower-case letters, digits, _ . -)" >&2; exit 2; }
        user=$2
        shift
        ;;
      --uninstall) uninstall=1 ;;
      -h | --help) service_usage; exit 0 ;;
      *) echo "install-service.sh: unknown option: $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
  done
  [[ -n $user ]] || user=$(id -un)
  [[ $user =~ ^[a-z_][a-z0-9_.-]*$ ]] || { echo "install-service.sh: pass --user USER: '$user' is no user name" >&2; exit 2; }
  local root=${SPARKC_SYSTEM_ROOT:-}  # tests install into a folder instead of /
  local systemd_dir=$root/etc/systemd/system
  local link=$root$SPARKC_SERVICE_FOLDER unit units=("$SPARKC_SERVICE_UNIT" "$SPARKC_WATCH_UNIT")
  dry_run && log "dry run: printing the steps, changing nothing"
  if ! dry_run && [[ ! -w $systemd_dir ]]; then
    warn "cannot write to $systemd_dir: run it as root (sudo $SPARKC_SCRIPT_DIR/install-service.sh)"
    exit 1
  fi
  if ((uninstall)); then
    service_step systemctl disable "${units[@]}"
    for unit in "${units[@]}"; do
      service_step rm -f "$systemd_dir/$unit" "$systemd_dir/$unit.d/user.conf"
      service_step rmdir "$systemd_dir/$unit.d"
    done
    service_step rm -f "$link"
    service_step systemctl daemon-reload
    dry_run || log "${units[*]} removed; the deployment's containers are untouched (stop-cluster.sh stops them)"
    return 0
  fi
  for unit in "${units[@]}"; do
    [[ -f $SPARKC_SCRIPT_DIR/systemd/$unit ]] \
      || { warn "$SPARKC_SCRIPT_DIR/systemd/$unit is missing: copy the whole compiled folder"; exit 1; }
  done
  service_step mkdir -p "${link%/*}"
  service_step ln -sfn "$SPARKC_SCRIPT_DIR" "$link"
  for unit in "${units[@]}"; do
    service_step mkdir -p "$systemd_dir/$unit.d"
    service_step install -m 0644 "$SPARKC_SCRIPT_DIR/systemd/$unit" "$systemd_dir/$unit"
    service_step write_file "$systemd_dir/$unit.d/user.conf" "$(printf '[Service]\nUser=%s\n' "$user")"
  done
  service_step systemctl daemon-reload
  service_step systemctl enable "${units[@]}"
  dry_run || log "${units[*]} enabled, as $user: they launch $SPARKC_DEPLOYMENT after every boot and watch it (start them" \
    "now: systemctl start ${units[*]}; follow them: journalctl -u $SPARKC_SERVICE_UNIT -u $SPARKC_WATCH_UNIT -f)"
}

# One step: printed under --dry-run, else run; a failure stops the script, naming the step.
service_step() {
  local word shown=()
  for word; do shown+=("$(dry_word "$word")"); done
  if dry_run; then
    printf '%s\n' "${shown[*]}"
    return 0
  fi
  "$@" || { warn "failed: ${shown[*]}"; exit 1; }
}

# A small file, written whole, with a final newline; under --dry-run its text is the step's last word.
write_file() { printf '%s\n' "$2" >"$1"; }
