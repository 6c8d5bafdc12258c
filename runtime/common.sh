# Functions every generated script shares. Plain bash: it reads the constants of the script that sources it.
# --dry-run (each script's option parser sets it): only dry_run below reads it.
SPARKC_DRY_RUN=0
# Dry-run lines go to fd 3, the script's own stdout, even from commands whose output is discarded.
exec 3>&1

log() { printf '%s [sparkc] %s\n' "$(date +%H:%M:%S)" "$(printable "$*")"; }
warn() { printf '%s [sparkc] WARNING: %s\n' "$(date +%H:%M:%S)" "$(printable "$*")" >&2; }
# Text a node or a program sent back (docker's, ip's or nvidia-smi's errors, a log's last lines, an image's
# env), as it may reach the operator's terminal: each control character but tab and newline (ESC, CR, BEL,
# DEL, and the C1 controls as UTF-8 writes them) becomes ?, so none of it can move the cursor, retitle the
# window or write the clipboard (OSC 52). The words given, or stdin without words; byte by byte in any locale.
printable() {
  local LC_ALL=C
  local text
  if (($#)); then
    text=$*
  else
    text=$(tr -d '\000' && echo x) # the x keeps the trailing newlines
    text=${text%x}
  fi
  text=${text//[$'\x01'-$'\x08'$'\x0b'-$'\x1f'$'\x7f']/?}
  printf '%s' "${text//$'\xc2'[$'\x80'-$'\x9f']/?}"
}
is_local() { [[ -z ${SPARKC_TARGET[$1]} ]]; }
# A word read from a node (a label, a name) as it may be printed: anything but [A-Za-z0-9._:/[]-] becomes ?.
safe_word() { printf '%s' "${1//[^A-Za-z0-9._:\/\[\]-]/?}"; }

# Files and folders the scripts write beside themselves (reports, logs, benchmark runs) are made anew, so
# that no write lands where a link planted in the build folder points: a file is filled under a fresh
# name from mktemp in its folder and renamed over its own (a rename replaces a name, following no link);
# a folder is made new. A link, or a file where a folder goes (or the other way), is refused, naming it.
own_path() { # PATH [file|folder]: fails, with a warning, unless PATH is missing or a plain one of that kind
  local path=$1 kind=${2:-file}
  if [[ -L $path ]]; then
    warn "$path is a symbolic link, where this script writes a $kind of its own; remove it and run again"
    return 1
  fi
  [[ ! -e $path || ($kind == file && -f $path) || ($kind == folder && -d $path) ]] && return 0
  warn "$path is not a $kind, where this script writes one; move it away and run again"
  return 1
}
# fresh_file FILE: prints the path of a new empty file beside FILE, to fill and then move over it with place_file.
fresh_file() {
  own_path "$1" || return 1
  mktemp "${1%/*}/.${1##*/}.XXXXXX" || { warn "cannot write into ${1%/*}"; return 1; }
}
place_file() { # NEW FILE
  chmod 644 -- "$1" && mv -f -T -- "$1" "$2" && return 0
  rm -f -- "$1"
  warn "cannot write $2"
  return 1
}
save_file() { # FILE: its new content is this function's input
  local new
  new=$(fresh_file "$1") || return 1
  cat >"$new" && place_file "$new" "$1"
}
# new_folder PARENT NAME: makes PARENT (a plain folder or missing) and a new folder PARENT/NAME in it (NAME.XXXXXX
# where NAME is taken); its path in SPARKC_NEW_FOLDER.
new_folder() {
  own_path "$1" folder && mkdir -p -- "$1" || return 1
  SPARKC_NEW_FOLDER=$1/$2
  mkdir -- "$SPARKC_NEW_FOLDER" 2>/dev/null && return 0
  SPARKC_NEW_FOLDER=$(mktemp -d "$1/$2.XXXXXX") || { warn "cannot make a folder in $1"; return 1; }
}

# Words as one command line for any POSIX login shell on a node (bash, dash, zsh, busybox sh): each
# word in single quotes, which keep every byte as it is, and a quote inside written '\''. (printf %q
# writes $'...' for some bytes, which dash reads as plain text.)
sh_quote() {
  local word line=""
  for word; do
    line+="'${word//\'/\'\\\'\'}' "
  done
  printf '%s' "$line"
}

# One ssh connection per node for the script's whole run (OpenSSH multiplexing): every later ssh to
# that node rides on it, a few milliseconds instead of a new handshake. The sockets live in a private
# folder (mode 700) with a short path (a socket path may not exceed about 104 bytes); the EXIT trap
# closes each master and removes the folder, also after a failure or an interrupt. Where the spec's
# ssh options set ControlMaster or ControlPath, the user's own multiplexing is left as it is.
SPARKC_SSH_MUX=()
SPARKC_SSH_MUX_DIR=""
ssh_mux_start() {
  local word node remote=0
  for word in "${SPARKC_SSH_OPTS[@]}"; do
    [[ ${word,,} == controlmaster=* || ${word,,} == controlpath=* ]] && return 0
  done
  for node in "${SPARKC_NODES[@]}"; do
    is_local "$node" || remote=1
  done
  ((remote)) || return 0
  local tmp=${TMPDIR:-/tmp}
  ((${#tmp} <= 40)) || tmp=/tmp
  SPARKC_SSH_MUX_DIR=$(mktemp -d "${tmp%/}/sparkc-ssh.XXXXXX") || { SPARKC_SSH_MUX_DIR=""; return 0; }
  chmod 700 "$SPARKC_SSH_MUX_DIR"
  # %C: a hash of user, host and port, so each node gets its own socket in 40 characters.
  SPARKC_SSH_MUX=(-o ControlMaster=auto -o "ControlPath=$SPARKC_SSH_MUX_DIR/%C" -o ControlPersist=30)
}

ssh_mux_stop() {
  [[ -n $SPARKC_SSH_MUX_DIR ]] || return 0
  local node
  if [[ -n $(ls -A "$SPARKC_SSH_MUX_DIR" 2>/dev/null) ]]; then
    for node in "${SPARKC_NODES[@]}"; do
      is_local "$node" || ssh "${SPARKC_SSH_OPTS[@]}" "${SPARKC_SSH_MUX[@]}" -O exit "${SPARKC_TARGET[$node]}" >/dev/null 2>&1 || true
    done
  fi
  rm -rf "$SPARKC_SSH_MUX_DIR"
  SPARKC_SSH_MUX_DIR=""
}

# Things to undo when the script ends, however it ends (subshells do not inherit the trap): a probe
# still running in the background, the scratch folder, the ssh connections.
SPARKC_BACKGROUND_PID=""
SPARKC_SCRATCH=""
on_exit() {
  [[ -z $SPARKC_BACKGROUND_PID ]] || kill "$SPARKC_BACKGROUND_PID" 2>/dev/null || true
  [[ -z $SPARKC_SCRATCH ]] || rm -rf "$SPARKC_SCRATCH"
  ssh_mux_stop
}
trap on_exit EXIT

# ssh to a node, with the spec's options and the shared connection; the remaining words go to ssh.
ssh_node() {
  local node=$1
  shift
  # shellcheck disable=SC2029  # callers quote the remote command with sh_quote
  ssh "${SPARKC_SSH_OPTS[@]}" "${SPARKC_SSH_MUX[@]}" "${SPARKC_TARGET[$node]}" "$@"
}

# Run a command, given as words, on a node: directly on the head, over ssh elsewhere, where the
# remote shell sees exactly these words. Where SPARKC_NODE_TIMEOUT is set (watch.sh), each command,
# its ssh connection included, is stopped after that many seconds.
SPARKC_NODE_TIMEOUT=0
on_node() {
  local node=$1 bound=()
  shift
  ((SPARKC_NODE_TIMEOUT == 0)) || bound=(timeout -k 5 "$SPARKC_NODE_TIMEOUT")
  if is_local "$node"; then
    "${bound[@]}" "$@"
  else
    # shellcheck disable=SC2029  # the remote command is quoted with sh_quote
    "${bound[@]}" ssh "${SPARKC_SSH_OPTS[@]}" "${SPARKC_SSH_MUX[@]}" "${SPARKC_TARGET[$node]}" -- "$(sh_quote "$@")"
  fi
}

# Whether this run only shows what it would do (--dry-run): the one question every function asks,
# where a dry run must skip a step or say something else.
dry_run() { ((SPARKC_DRY_RUN)); }

# The runner of commands that change something, given as words, on a node (as on_node runs them): under
# --dry-run it prints them instead, on fd 3, each word quoted so that the line can be pasted into a shell.
sparkc_run() {
  local node=$1
  shift
  if dry_run; then
    dry_print "$node" "$@" >&3
    return 0
  fi
  on_node "$node" "$@"
}

# A word as a POSIX shell reads it back: bare where that is safe, else in single quotes.
dry_word() {
  if [[ $1 =~ ^[A-Za-z0-9_./:=@%+,-]+$ ]]; then
    printf '%s' "$1"
  else
    printf "'%s'" "${1//\'/\'\\\'\'}"
  fi
}

# A command as a reader wants it: on one line when short, else the words before the first flag
# (`docker run`), then one flag with its value per line, continued with ` \`, as the script's arrays are.
# docker's flags that take no value are known by name; other words after a flag are its value.
dry_print() {
  local node=$1 word line="" lines=() i
  shift
  local argv=("$@")
  for word in "${argv[@]}"; do line+="$(dry_word "$word") "; done
  if ((${#line} <= 100)); then
    printf '[%s] %s\n' "$node" "${line% }"
    return 0
  fi
  line=""
  for ((i = 0; i < ${#argv[@]}; i++)); do
    word=$(dry_word "${argv[i]}")
    if [[ ${argv[i]} == -* || ${#lines[@]} -gt 0 ]] && [[ -n $line ]]; then
      lines+=("$line")
      line=""
    fi
    line+=${line:+ }$word
    case ${argv[i]} in
      -d | -i | -t | --rm | --init | --privileged | --read-only | --*=* | -*=*) ;;
      -*)
        if ((i + 1 < ${#argv[@]})) && [[ ${argv[i + 1]} != -* ]]; then
          i=$((i + 1))
          line+=" $(dry_word "${argv[i]}")"
        fi
        ;;
    esac
  done
  lines+=("$line")
  printf '[%s] %s' "$node" "${lines[0]}"
  for line in "${lines[@]:1}"; do printf ' \\\n    %s' "$line"; done
  printf '\n'
}

# docker's view of a container: running, exited, ... or "missing"; where docker cannot say (its daemon
# down), why, not "missing": the container may well be there. By the status: for a missing container
# docker still prints an (empty) line. Its error is read apart (a second call, on failure only), so that
# what ssh prints on stderr never mixes into the state.
container_state() {
  local state why
  if state=$(on_node "$1" docker inspect --format '{{.State.Status}}' "${SPARKC_CONTAINER[$1]}" 2>/dev/null); then
    printf '%s\n' "$state"
    return 0
  fi
  why=$(on_node "$1" docker inspect --format '{{.State.Status}}' "${SPARKC_CONTAINER[$1]}" 2>&1 >/dev/null) || true
  if [[ $why == *"No such object"* || $why == *"No such container"* ]]; then
    echo missing
  elif [[ $why == *"Cannot connect to the Docker daemon"* ]]; then
    echo "UNKNOWN: docker is not running on $1 (sudo systemctl start docker)"
  else
    why=${why//[[:cntrl:]]/ }
    echo "UNKNOWN: docker did not answer on $1: ${why:0:200}"
  fi
}

# Ask Ray on the head whether every node and GPU is alive, on the fabric addresses it should use.
readonly SPARKC_RAY_CHECK_PY='
import sys
import ray
want_nodes, want_gpus, want_ips = int(sys.argv[1]), float(sys.argv[2]), set(sys.argv[3:])
ray.init(address="auto", logging_level="ERROR", log_to_driver=False)
alive = [n for n in ray.nodes() if n.get("Alive")]
ips = {n.get("NodeManagerAddress") for n in alive}
gpus = sum(n.get("Resources", {}).get("GPU", 0) for n in alive)
print("ray: %d/%d nodes alive, %g/%g GPUs; missing: %s; unexpected addresses: %s" % (
    len(alive), want_nodes, gpus, want_gpus, " ".join(sorted(want_ips - ips)) or "none",
    " ".join(sorted(ips - want_ips)) or "none"))
sys.exit(0 if len(alive) >= want_nodes and gpus >= want_gpus and ips == want_ips else 1)
'
ray_check() {
  on_node "$SPARKC_HEAD" docker exec "${SPARKC_CONTAINER[$SPARKC_HEAD]}" python3 -c "$SPARKC_RAY_CHECK_PY" \
    "${#SPARKC_RAY_EXPECTED_IPS[@]}" "$SPARKC_TOTAL_GPUS" "${SPARKC_RAY_EXPECTED_IPS[@]}"
}

# The engine's API key, where it wants one: the variable SPARKC_API_KEY_VAR names (a secret, exported where
# the scripts run), else the key engine.args gives it; empty: no key.
api_key() {
  if [[ -n $SPARKC_API_KEY_VAR ]]; then
    printf '%s' "${!SPARKC_API_KEY_VAR-}"
  else
    printf '%s' "$SPARKC_API_KEY_GIVEN"
  fi
}

# Whether a value holds a control character (C0, DEL) or a C1 one or U+2028/U+2029 in UTF-8: what the
# compiler refuses in the spec's values. Bytes, whatever the caller's locale.
has_control() {
  local LC_ALL=C
  [[ $1 == *[[:cntrl:]]* || $1 == *$'\xc2'[$'\x80'-$'\x9f']* || $1 == *$'\xe2\x80'[$'\xa8\xa9']* ]]
}

# Why the API key cannot be sent, or nothing: curl reads the header from a config text (curl -K -),
# where a line break would start a line of curl's own options (output = FILE, ...).
api_key_problem() {
  local key=$SPARKC_API_KEY_GIVEN
  [[ -z $SPARKC_API_KEY_VAR ]] || key=${!SPARKC_API_KEY_VAR-}  # as it is, not as $(api_key) gives it: with no final newline
  if has_control "$key"; then
    printf '%s' "the API key in ${SPARKC_API_KEY_VAR:-engine.args} holds a control character (a line break, tab, ...);" \
      " set it without one"
  fi
}

# curl, sending the API key (if any) as a header read from stdin (curl -K -), never on a command line.
api_curl() {
  local key problem
  key=$(api_key)
  if [[ -z $key ]]; then
    curl "$@"
    return
  fi
  problem=$(api_key_problem)
  if [[ -n $problem ]]; then
    warn "$problem"
    return 2
  fi
  key=${key//\\/\\\\}
  printf 'header = "Authorization: Bearer %s"\n' "${key//\"/\\\"}" | curl -K - "$@"
}

# HTTP probes of the OpenAI-compatible endpoint, from the head.
http_get() { api_curl -fsS --max-time 10 "$SPARKC_PROBE_URL$1"; }
probe_health() { http_get /health >/dev/null 2>&1; }
probe_models() { http_get /v1/models 2>/dev/null | grep -qF -- "$SPARKC_SERVED_MODEL_JSON"; }
probe_completion() {
  api_curl -fsS --max-time 60 -H 'Content-Type: application/json' -d "$SPARKC_PROBE_BODY" \
    "$SPARKC_PROBE_URL/v1/completions" >/dev/null 2>&1
}
endpoint_healthy() { probe_health && probe_models && probe_completion; }

# Copy every node's container log and state into one folder, every node at once; never fails (nodes
# may be unreachable). Arguments: the folder, docker logs' --tail and, optionally, its --since.
collect_logs() {
  local dir=$1 tail=$2 since=${3:-} node pids=() pid logs_args
  own_path "$dir" folder && mkdir -p -- "$dir" || return 1
  logs_args=(--tail "$tail")
  [[ -z $since ]] || logs_args+=(--since "$since")
  for node in "${SPARKC_NODES[@]}"; do
    (
      trap - ERR
      {
        on_node "$node" docker logs "${logs_args[@]}" "${SPARKC_CONTAINER[$node]}" 2>&1 \
          || echo "(no logs: node unreachable or container missing)"
      } | save_file "$dir/$node.log"
      {
        on_node "$node" docker inspect --format \
          '{{.Name}} status={{.State.Status}} exit={{.State.ExitCode}} error={{.State.Error}} started={{.State.StartedAt}} finished={{.State.FinishedAt}}' \
          "${SPARKC_CONTAINER[$node]}" 2>&1 || echo "missing or unreachable"
      } | save_file "$dir/$node.state"
    ) </dev/null &
    pids+=("$!")
  done
  for pid in "${pids[@]}"; do
    wait "$pid" || true
  done
}
