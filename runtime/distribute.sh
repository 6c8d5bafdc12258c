distribute_usage() {
  cat <<'USAGE'
Usage: distribute.sh [--dry-run] [--image-only | --model-only] [--chain]

Copies the image and the model's folders (the weights, and a draft model's where the spec has one)
from the head (where this runs) to every node that lacks them or has something else, over each node's
fabric address; nodes that already match are skipped (same image ID; same file names and sizes).

  --dry-run      say what would be copied where, copy nothing
  --image-only   only the image
  --model-only   only the model's folders
  --chain        send the image down a chain, each node loading it while passing it on, so the
                 head's link carries one copy (default: from the head to each node at once). The
                 chain needs each node to reach the next one over ssh, which setup-fabric does not
                 set up: its key authorized there, and the next node's host key known under the
                 name launch-cluster.sh uses for it
  --star         the default: from the head to each node at once
  --progress S   a line with the bytes sent so far and the rate every S seconds (default 5 on a
                 terminal, 30 otherwise)
  -h, --help     this text

Copies check each node's host key as ssh knows it by the node's ssh name (HostKeyAlias): the same
sshd answers on every address, so nothing more needs recording in known_hosts.

Writes distribute-report.txt beside this script: one line per node and item, with bytes and seconds.
Exit status: 0 every node matches, 1 a copy failed, 2 usage.
USAGE
}

SPARKC_IMAGE_ONLY=0
SPARKC_MODEL_ONLY=0
SPARKC_CHAIN=0
declare -A SPARKC_KEY_NAME=()  # per node: the name its host key is known under (HostKeyAlias)
SPARKC_COPIES=()  # the copies running now (process IDs), which copy_progress watches
SPARKC_COPY_ARGV=() # set by model_copy_argv
SPARKC_PROGRESS_EVERY=30
[[ -t 1 ]] && SPARKC_PROGRESS_EVERY=5
SPARKC_REPORT=$SPARKC_SCRIPT_DIR/distribute-report.txt
SPARKC_REPORT_FD=""  # open on the report, made anew for this run (no dry run)

# rsync's remote shell as one -e string. rsync splits that string itself, not as a shell would: on
# spaces, where '...' and "..." group, a doubled quote inside them stands for one, and a backslash is
# just a byte. So each word goes in single quotes with every ' doubled, which rsync gives back whole
# whatever it holds (sh_quote's '\'' would end rsync's quoting and turn the rest into more ssh words).
rsync_shell() {
  local word line=ssh
  for word; do
    line+=" '${word//\'/\'\'}'"
  done
  printf '%s' "$line"
}

# The name ssh knows NODE's host key by when it connects with the node's ssh name, as launch-cluster.sh
# does: its HostKeyAlias where the ssh config sets one, else the host name ssh resolves the name to, as
# [host]:port off port 22, as known_hosts writes it (ssh -G prints the options ssh would use, the user's
# ssh config and the spec's applied, and connects nowhere). Copies go to another address of the same sshd,
# so HostKeyAlias keeps verification on there, and BatchMode still refuses a key nobody recorded.
host_key_name() { # NODE
  local name
  name=$(ssh -G "${SPARKC_SSH_OPTS[@]}" "${SPARKC_TARGET[$1]}" 2>/dev/null | awk '
    $1 == "hostname" { host = $2 } $1 == "port" { port = $2 } $1 == "hostkeyalias" { alias = $2 }
    END {
      if (alias != "") print alias
      else if (host == "") exit 1
      else if (port == "" || port == 22) print host
      else printf "[%s]:%s\n", host, port
    }') || name=${SPARKC_TARGET[$1]#*@}
  printf '%s' "$name"
}

# ssh's words for a copy to NODE: the spec's options, the node's host key name, its fabric address.
fabric_words() { # NODE
  printf '%s\0' "${SPARKC_SSH_OPTS[@]}" -o "HostKeyAlias=${SPARKC_KEY_NAME[$1]}"
}

# ssh to a node's fabric address: copies must not crawl over the management network.
fabric_ssh() {
  local node=$1 words=()
  shift
  mapfile -d '' words < <(fabric_words "$node")
  ssh "${words[@]}" "${SPARKC_FABRIC_TARGET[$node]}" -- "$(sh_quote "$@")"
}

# What to do about a copy's ssh errors (FILE) where ssh refused a host key: the fix, not just the symptom.
key_hint() { # NODE FILE...
  local node=$1
  shift
  if grep -qs 'HOST IDENTIFICATION HAS CHANGED' "$@"; then
    printf ' (%s answers with another host key than the one known for %s: if it was reinstalled, remove the old' \
      "$node" "${SPARKC_KEY_NAME[$node]}"
    printf ' entry with ssh-keygen -R %s, then connect once with ssh %s and compare the fingerprint)' \
      "${SPARKC_KEY_NAME[$node]}" "${SPARKC_TARGET[$node]}"
  elif grep -qs 'Host key verification failed' "$@"; then
    printf ' (the host key of %s is not known as %s here: connect once with ssh %s and compare the fingerprint' \
      "$node" "${SPARKC_KEY_NAME[$node]}" "${SPARKC_TARGET[$node]}"
    printf ' with ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub on %s; %s)' "$node" \
      "$( ((SPARKC_CHAIN)) && echo "with --chain, each node needs the next one's key too" || echo "setup-fabric checks this")"
  fi
}

record() { # NODE ITEM ACTION BYTES SECONDS VIA
  [[ -z $SPARKC_REPORT_FD ]] || printf 'node=%s item=%s action=%s bytes=%s seconds=%s via=%s\n' "$@" >&"$SPARKC_REPORT_FD"
}

rate() { # BYTES SECONDS: MB/s, one decimal
  local bytes=$1 seconds=$2
  ((seconds > 0)) || seconds=1
  printf '%d.%d MB/s' $((bytes / seconds / 1000000)) $((bytes / seconds / 100000 % 10))
}

# The last count of bytes a copy's counter wrote into FILE: dd's status=progress lines ("N bytes ...
# copied", one a second, ended by a carriage return) or rsync's --info=progress2 lines ("1,234  5% ...").
sent_bytes() { # FILE
  tr '\r' '\n' <"$1" 2>/dev/null \
    | awk '$1 ~ /^[0-9,]+$/ && ($2 == "bytes" || $2 ~ /%$/) { n = $1 } END { gsub(",", "", n); print n + 0 }'
}

# While any of SPARKC_COPIES (process IDs) runs, every SPARKC_PROGRESS_EVERY seconds: each copy's bytes so far, of
# TOTAL where known. It ends on its own, within a second of the copies (no sleep left behind).
copy_progress() { # WHAT TOTAL LABEL FILE [LABEL FILE]...
  local what=$1 total=$2 start=$SECONDS waited=0 sent of percent i pairs
  shift 2
  pairs=("$@")
  while kill -0 "${SPARKC_COPIES[@]}" 2>/dev/null; do
    sleep 1
    ((++waited % SPARKC_PROGRESS_EVERY)) && continue
    for ((i = 0; i < ${#pairs[@]}; i += 2)); do
      sent=$(sent_bytes "${pairs[i + 1]}")
      of=""
      # TOTAL is the image's size or the folder's; the stream's framing adds a little: say "about", and
      # leave 100% to the line that says it is done.
      if ((total > 0)); then
        percent=$((sent * 100 / total > 99 ? 99 : sent * 100 / total))
        of=" of about $((total / 1000000)) MB ($percent%)"
      fi
      log "${pairs[i]}: $what: $((sent / 1000000)) MB sent$of, $(rate "$sent" $((SECONDS - start)))"
    done
  done
}

# Until the SPARKC_COPIES end (a copy that fails is judged by the node's state afterwards), with progress lines.
wait_copies() { # WHAT TOTAL LABEL FILE [LABEL FILE]...
  local watcher
  copy_progress "$@" &
  watcher=$!
  wait "${SPARKC_COPIES[@]}" || true
  wait "$watcher" || true
}

# A filter that counts the bytes passing through it (dd's status=progress: a count a second into FILE);
# in the pipe, its last count is written when the copy ends.
count_bytes() { # FILE
  LC_ALL=C dd bs=1M status=progress 2>"$1"
}

# One hop of the image chain, run on a node: load what arrives on stdin and, while loading, pass the
# same bytes on to the next hop. Its own text arrives as $0 (bash -c TEXT TEXT ARGS), so each hop
# hands the program on. Arguments: the number of ssh options, the options, then NAME|SPARKC_TARGET|KEY-NAME
# per hop (KEY-NAME: the name the hop's host key is known under, for HostKeyAlias).
relay() {
  local count=$1
  shift
  local opts=("${@:1:count}")
  shift "$count"
  local here=${1%%|*}
  shift
  if (($# == 0)); then
    docker load >&2 || return 1
    echo "sparkc-relay: $here loaded" >&2
    return 0
  fi
  local fifo status=0 loader
  fifo=$(mktemp -u) && mkfifo "$fifo" || return 1
  docker load <"$fifo" >&2 &
  loader=$!
  local next=${1#*|}
  tee "$fifo" | ssh "${opts[@]}" -o "HostKeyAlias=${next#*|}" "${next%%|*}" -- \
    "$(sh_quote bash -c "$0" "$0" "$count" "${opts[@]}" "$@")" || status=1
  wait "$loader" || status=1
  rm -f "$fifo"
  echo "sparkc-relay: $here loaded" >&2
  return "$status"
}
SPARKC_RELAY_PROGRAM="$(declare -f sh_quote relay)
relay \"\$@\""
readonly SPARKC_RELAY_PROGRAM

image_id() { on_node "$1" docker image inspect --format '{{.Id}}' "$SPARKC_IMAGE" 2>/dev/null || true; }

distribute_image() {
  local head_id node id start seconds bytes hops=() need=() dir failed=0
  head_id=$(image_id "$SPARKC_HEAD")
  [[ -n $head_id ]] || { warn "image $SPARKC_IMAGE is not on the head, $SPARKC_HEAD: pull it there first"; return 1; }
  for node in "${SPARKC_NODES[@]:1}"; do
    id=$(image_id "$node")
    if [[ $id == "$head_id" ]]; then
      log "$node: image $SPARKC_IMAGE ${head_id:7:12} already there, skipped"
      dry_run || record "$node" image skipped 0 0 -
    else
      if [[ -n $id ]]; then log "$node: image ${id:7:12} differs: copy"; else log "$node: image missing: copy"; fi
      need+=("$node")
      hops+=("$node|${SPARKC_FABRIC_TARGET[$node]}|${SPARKC_KEY_NAME[$node]}")
    fi
  done
  ((${#need[@]})) || return 0
  if dry_run; then
    if ((SPARKC_CHAIN)); then
      printf '[%s] docker save %q | ssh -> %s (each loads and passes it on)\n' "$SPARKC_HEAD" "$SPARKC_IMAGE" \
        "$(for node in "${need[@]}"; do printf '%s ' "${SPARKC_FABRIC_TARGET[$node]}"; done)" >&3
    else
      for node in "${need[@]}"; do
        printf '[%s] docker save %q | ssh -o HostKeyAlias=%s %s docker load\n' "$SPARKC_HEAD" "$SPARKC_IMAGE" \
          "${SPARKC_KEY_NAME[$node]}" "${SPARKC_FABRIC_TARGET[$node]}" >&3
      done
    fi
    return 0
  fi
  dir=$(mktemp -d)
  start=$SECONDS
  local total watched=()
  SPARKC_COPIES=()
  total=$(docker image inspect --format '{{.Size}}' "$SPARKC_IMAGE" 2>/dev/null) || total=0
  [[ $total =~ ^[0-9]+$ ]] || total=0
  if ((SPARKC_CHAIN == 0)); then
    for node in "${need[@]}"; do
      (docker save "$SPARKC_IMAGE" | count_bytes "$dir/bytes.$node" | fabric_ssh "$node" docker load >&2) \
        2>"$dir/$node.err" &
      SPARKC_COPIES+=($!)
      watched+=("$node" "$dir/bytes.$node")
    done
  else
    docker save "$SPARKC_IMAGE" | count_bytes "$dir/bytes" | fabric_ssh "${need[0]}" bash -c "$SPARKC_RELAY_PROGRAM" \
      "$SPARKC_RELAY_PROGRAM" "${#SPARKC_SSH_OPTS[@]}" "${SPARKC_SSH_OPTS[@]}" "${hops[@]}" 2>"$dir/chain.err" &
    SPARKC_COPIES+=($!)
    watched+=("${need[*]}" "$dir/bytes")
  fi
  wait_copies image "$total" "${watched[@]}"
  seconds=$((SECONDS - start))
  local i via err
  for i in "${!need[@]}"; do
    node=${need[i]}
    # The chain's hop i got the stream from hop i-1; every hop receives the same bytes.
    via=$SPARKC_HEAD
    ((SPARKC_CHAIN == 0 || i == 0)) || via=${need[i - 1]}
    if ((SPARKC_CHAIN)); then bytes=$(sent_bytes "$dir/bytes"); else bytes=$(sent_bytes "$dir/bytes.$node"); fi
    if [[ $(image_id "$node") != "$head_id" ]]; then
      err=$dir/$node.err
      ((SPARKC_CHAIN == 0)) || err=$dir/chain.err
      warn "$node: image copy failed: $(tail -n 3 "$err" 2>/dev/null | tr '\n' ' ')$(key_hint "$node" "$err")"
      failed=1
      continue
    fi
    log "$node: image loaded, ${bytes:-0} bytes in ${seconds}s ($(rate "${bytes:-0}" "$seconds")) from $via"
    record "$node" image copied "${bytes:-0}" "$seconds" "$via"
  done
  rm -rf "$dir"
  return "$failed"
}

# A folder's file names and sizes on NODE, as one hash ("missing" when there is no such folder).
model_signature() { # NODE FOLDER
  # shellcheck disable=SC2016  # expanded by the node's shell
  on_node "$1" sh -c 'cd "$1" 2>/dev/null || { echo missing; exit 0; }
    find . -type f -printf "%P %s\n" | LC_ALL=C sort | sha256sum' sparkc-model "$2" 2>/dev/null || echo unknown
}

# SPARKC_COPY_ARGV: the command that mirrors FOLDER onto NODE; --dry-run prints the same words.
model_copy_argv() { # NODE FOLDER
  local words
  mapfile -d '' words < <(fabric_words "$1")
  SPARKC_COPY_ARGV=(rsync -a -s --delete --stats --info=progress2 -e "$(rsync_shell "${words[@]}")" "$2/"
    "${SPARKC_FABRIC_TARGET[$1]}:$2/")
}

# One of the model's folders (ITEM: model, draft) from the head to every node where it differs.
distribute_model() { # ITEM FOLDER
  local item=$1 folder=$2 head_sig node sig need=() dir start failed=0 bytes seconds
  head_sig=$(model_signature "$SPARKC_HEAD" "$folder")
  [[ $head_sig != missing && $head_sig != unknown ]] \
    || { warn "$item folder $folder is not on the head, $SPARKC_HEAD"; return 1; }
  for node in "${SPARKC_NODES[@]:1}"; do
    sig=$(model_signature "$node" "$folder")
    if [[ $sig == "$head_sig" ]]; then
      log "$node: $item folder $folder already matches (file names and sizes), skipped"
      dry_run || record "$node" "$item" skipped 0 0 -
    else
      log "$node: $item folder $folder ${sig/#missing/is missing}: copy"
      [[ $sig == missing ]] || log "$node: (it differs from the head's)"
      need+=("$node")
    fi
  done
  ((${#need[@]})) || return 0
  if dry_run; then
    for node in "${need[@]}"; do
      local words
      mapfile -d '' words < <(fabric_words "$node")
      dry_print "$SPARKC_HEAD" ssh "${words[@]}" "${SPARKC_FABRIC_TARGET[$node]}" -- "$(sh_quote mkdir -p "$folder")" >&3
      model_copy_argv "$node" "$folder"
      dry_print "$SPARKC_HEAD" "${SPARKC_COPY_ARGV[@]}" >&3
    done
    return 0
  fi
  dir=$(mktemp -d)
  start=$SECONDS
  local total watched=()
  SPARKC_COPIES=()
  total=$(du -sb -- "$folder" 2>/dev/null | cut -f1) || total=0
  [[ $total =~ ^[0-9]+$ ]] || total=0
  for node in "${need[@]}"; do
    (
      model_copy_argv "$node" "$folder"
      fabric_ssh "$node" mkdir -p "$folder" && "${SPARKC_COPY_ARGV[@]}"
    ) >"$dir/$node.out" 2>&1 &
    SPARKC_COPIES+=($!)
    watched+=("$node" "$dir/$node.out")
  done
  wait_copies "$item" "$total" "${watched[@]}"
  seconds=$((SECONDS - start))
  for node in "${need[@]}"; do
    if [[ $(model_signature "$node" "$folder") != "$head_sig" ]]; then
      warn "$node: $item copy failed: $(tail -n 3 "$dir/$node.out" | tr '\n' ' ')$(key_hint "$node" "$dir/$node.out")"
      failed=1
      continue
    fi
    bytes=$(grep -m1 'Total bytes sent' "$dir/$node.out" | tr -dc 0-9)
    log "$node: $item copied, ${bytes:-0} bytes in ${seconds}s ($(rate "${bytes:-0}" "$seconds")) from $SPARKC_HEAD"
    record "$node" "$item" copied "${bytes:-0}" "$seconds" "$SPARKC_HEAD"
  done
  rm -rf "$dir"
  return "$failed"
}

distribute_main() {
  while (($#)); do
    case $1 in
      --dry-run) SPARKC_DRY_RUN=1 ;;
      --image-only) SPARKC_IMAGE_ONLY=1 ;;
      --model-only) SPARKC_MODEL_ONLY=1 ;;
      --star) SPARKC_CHAIN=0 ;;
      --chain) SPARKC_CHAIN=1 ;;
      --progress)
        [[ ${2:-} =~ ^[1-9][0-9]{0,4}$ ]] || {
          echo "distribute.sh: --progress needs a number of seconds from 1 to 99999" >&2
          exit 2
        }
        SPARKC_PROGRESS_EVERY=$2
        shift
        ;;
      -h | --help) distribute_usage; exit 0 ;;
      *) echo "distribute.sh: unknown option: $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
  done
  dry_run || ssh_mux_start  # after the options: a dry run opens no connection
  if ((SPARKC_IMAGE_ONLY && SPARKC_MODEL_ONLY)); then
    echo "distribute.sh: --image-only and --model-only exclude each other" >&2
    exit 2
  fi
  local status=0 node
  for node in "${SPARKC_NODES[@]:1}"; do
    SPARKC_KEY_NAME[$node]=$(host_key_name "$node")
  done
  if ! dry_run; then
    local new
    new=$(fresh_file "$SPARKC_REPORT") || exit 1
    exec {SPARKC_REPORT_FD}>>"$new"
    place_file "$new" "$SPARKC_REPORT" || exit 1
  fi
  if ((SPARKC_MODEL_ONLY == 0)); then
    log "== image $SPARKC_IMAGE"
    distribute_image || status=1
  fi
  if ((SPARKC_IMAGE_ONLY == 0)); then
    log "== model folder $SPARKC_MODEL_HOST_PATH"
    distribute_model model "$SPARKC_MODEL_HOST_PATH" || status=1
    if [[ -n $SPARKC_DRAFT_FOLDER ]]; then
      log "== draft model folder $SPARKC_DRAFT_FOLDER"
      distribute_model draft "$SPARKC_DRAFT_FOLDER" || status=1
    fi
  fi
  dry_run || log "report: $SPARKC_REPORT"
  return "$status"
}
