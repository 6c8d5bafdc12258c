distribute_usage() {
  cat <<'USAGE'
Usage: distribute.sh [--dry-run] [--image-only | --model-only] [--streams N] [--verify] [--chain]

Copies the image and the model's folders (the weights, and a draft model's where the spec has one)
from the head (where this runs) to every node that lacks them or has something else, along the cables:
each worker receives from the head or from the neighbour the compiled routes name, over each address
of that cable (both twins where both are addressed), and a node passes on what it receives while it
receives it, so a ring costs about the time of one cable. Only a node no cable path reaches is fed over
the control network, and the script says so. Nodes that already match are skipped (same image ID; same
file names, sizes and checksums of each file's first and last MiB).

  --dry-run      say what would be copied where, copy nothing
  --image-only   only the image
  --model-only   only the model's folders
  --streams N    copy in N streams at once (default 8), spread over each cable's addresses: one ssh
                 stream is held to one core by its cipher, and fills only part of a link
  --verify       check every copied file by the sha256 of all of it (default: of its first and last
                 MiB, and its size); the image by its ID
  --chain        copy along the node order instead, each node from the one before it, over the fabric
                 addresses (for a switched fabric whose head link is the narrow one)
  --star         the default routes (from the head where a cable or the switch reaches the node)
  --progress S   a line with the bytes sent so far and the rate every S seconds (default 5 on a
                 terminal, 30 otherwise)
  -h, --help     this text

An interrupted copy resumes: each node keeps the pieces that arrived (the image's under
/var/tmp/sparkc-distribute on every node, the head's archive of it there too; the weights' beside
each file), and the next run sends only what is missing. Copies check each node's host key as ssh
knows it by the node's ssh name (HostKeyAlias), on every address; a node that passes copies on checks
the next node's key in its own known_hosts, under that same name.

Writes distribute-report.txt beside this script: one line per node and item, with bytes, seconds,
where from and the bytes a node had already (resumed).
Exit status: 0 every node matches, 1 a copy failed, 2 usage.
USAGE
}

SPARKC_IMAGE_ONLY=0
SPARKC_MODEL_ONLY=0
SPARKC_CHAIN=0
SPARKC_COPIES=()  # the streams running now (process IDs), which copy_progress watches
SPARKC_PROGRESS_EVERY=30
[[ -t 1 ]] && SPARKC_PROGRESS_EVERY=5
SPARKC_REPORT=$SPARKC_SCRIPT_DIR/distribute-report.txt
SPARKC_REPORT_FD=""  # open on the report, made anew for this run (no dry run)
SPARKC_STAGE_ROOT=/var/tmp/sparkc-distribute

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

# Before stopping for a relayed node's missing host key record: each node the head copies to itself is tried
# once, so that one run names every host key still to be recorded.
reach_direct_nodes() {
  local node err
  err=$(mktemp) || return 0
  for node in "${SPARKC_NODES[@]:1}"; do
    [[ ${SPARKC_ROUTE_FROM[$node]} == "$SPARKC_HEAD" ]] || continue
    on_node "$node" true >/dev/null 2>"$err" \
      || warn "$node: cannot be reached: $(head -c 300 "$err" | tr '\r\n' '  ')$(key_hint "$node" "$err")"
  done
  rm -f "$err"
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
      "$( [[ ${SPARKC_ROUTE_FROM[$node]:-$SPARKC_HEAD} == "$SPARKC_HEAD" ]] && echo "setup-fabric checks this" || echo "where ${SPARKC_ROUTE_FROM[$node]} passes copies on, it must also log in to $node with its own key")"
  fi
}

record() { # NODE ITEM ACTION BYTES SECONDS VIA RESUMED
  [[ -z $SPARKC_REPORT_FD ]] \
    || printf 'node=%s item=%s action=%s bytes=%s seconds=%s via=%s resumed=%s\n' "$@" >&"$SPARKC_REPORT_FD"
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

# While any of SPARKC_COPIES (process IDs) runs, every SPARKC_PROGRESS_EVERY seconds: the bytes the head sent
# so far (one copy: each node it feeds gets the same), of TOTAL. It ends within a second of the copies.
copy_progress() { # WHAT TOTAL LABEL DIR
  local what=$1 total=$2 label=$3 dir=$4 start=$SECONDS waited=0 sent percent file pid alive
  while :; do
    alive=0
    for pid in "${SPARKC_COPIES[@]}"; do
      kill -0 "$pid" 2>/dev/null && alive=1
    done
    ((alive)) || return 0
    sleep 1
    ((++waited % SPARKC_PROGRESS_EVERY)) && continue
    sent=$(sent_total "$dir")
    # Leave 100% to the line that says it is done.
    percent=$((total > 0 ? (sent * 100 / total > 99 ? 99 : sent * 100 / total) : 0))
    log "$label: $what: $((sent / 1000000)) MB sent of about $((total / 1000000)) MB ($percent%), $(rate "$sent" $((SECONDS - start)))"
  done
}

sent_total() { # DIR: the bytes of every piece's counter there
  local file sum=0
  for file in "$1"/bytes.*; do
    [[ -e $file ]] && sum=$((sum + $(sent_bytes "$file")))
  done
  echo "$sum"
}

# Where NODE keeps the pieces of the image (@NODE@ for every node's own): one folder per node and
# deployment, so nodes that share a file system do not write the same pieces.
stage_dir() { printf '%s/%s/%s' "$SPARKC_STAGE_ROOT" "$SPARKC_DEPLOYMENT" "$1"; }

# The words a dry run prints for a copy to NODE, and what a run says about the route before copying.
route_line() { # WHAT NODE
  local node=$2
  printf 'copy %s to %s from %s over %s in up to %s streams' "$1" "$node" "${SPARKC_ROUTE_FROM[$node]}" \
    "${SPARKC_ROUTE_VIA[$node]}" "$SPARKC_STREAMS"
}

# Says each node's route; a node that no cable reaches is fed over the control network, said as a warning.
say_routes() { # WHAT NODE...
  local what=$1 node
  shift
  for node; do
    if dry_run; then
      printf '[%s] %s\n' "$SPARKC_HEAD" "$(route_line "$what" "$node")" >&3
    else
      log "$node: $(route_line "$what" "$node")"
    fi
    [[ ${SPARKC_COPY_CABLED[$node]:-1} == 1 || $SPARKC_CHAIN == 1 ]] \
      || warn "$node: no cable path reaches it from $SPARKC_HEAD: its $what goes over the control network"
  done
}

# A copy's outcome on each node of NEED: recorded, or warned about with the streams' errors.
report_copies() { # ITEM DIR SECONDS FAILED-NODES... -- NEED...
  local item=$1 dir=$2 seconds=$3 node action failed=" "
  shift 3
  while [[ $1 != -- ]]; do
    failed+="$1 "
    shift
  done
  shift
  local status=0
  for node; do
    if [[ $failed == *" $node "* ]]; then
      warn "$node: $item copy failed: $(cat "$dir"/stream.*.err 2>/dev/null | tail -n 3 | tr '\n' ' ')$(key_hint "$node" "$dir"/stream.*.err)"
      status=1
      continue
    fi
    action=copied
    ((SPARKC_RESUMED[$node] == 0)) || action=resumed
    log "$node: $item $action, ${SPARKC_RECEIVES[$node]} bytes in ${seconds}s ($(rate "${SPARKC_RECEIVES[$node]}" "$seconds")) from ${SPARKC_ROUTE_FROM[$node]}$( ((SPARKC_RESUMED[$node] == 0)) || echo ", ${SPARKC_RESUMED[$node]} bytes there already")"
    record "$node" "$item" "$action" "${SPARKC_RECEIVES[$node]}" "$seconds" "${SPARKC_ROUTE_FROM[$node]}" "${SPARKC_RESUMED[$node]}"
  done
  return "$status"
}

image_id() { on_node "$1" docker image inspect --format '{{.Id}}' "$SPARKC_IMAGE" 2>/dev/null || true; }

distribute_image() {
  local head_id node id need=() dir broken=() tar size start seconds i pieces=() list
  head_id=$(image_id "$SPARKC_HEAD")
  [[ -n $head_id ]] || { warn "image $SPARKC_IMAGE is not on the head, $SPARKC_HEAD: pull it there first"; return 1; }
  for node in "${SPARKC_NODES[@]:1}"; do
    id=$(image_id "$node")
    if [[ $id == "$head_id" ]]; then
      log "$node: image $SPARKC_IMAGE ${head_id:7:12} already there, skipped"
      dry_run || record "$node" image skipped 0 0 - 0
    else
      if [[ -n $id ]]; then log "$node: image ${id:7:12} differs: copy"; else log "$node: image missing: copy"; fi
      need+=("$node")
    fi
  done
  ((${#need[@]})) || return 0
  say_routes image "${need[@]}"
  dry_run && return 0
  # The archive docker save writes, kept on the head until every node loaded it, so a resumed copy sends
  # the same bytes.
  tar=$(stage_dir "$SPARKC_HEAD")/image-${head_id#sha256:}.tar
  if [[ ! -f $tar ]]; then
    log "saving $SPARKC_IMAGE to $tar"
    if ! { mkdir -p -- "${tar%/*}" && docker save -o "$tar.partial" "$SPARKC_IMAGE" && mv -f -- "$tar.partial" "$tar"; }; then
      warn "cannot save $SPARKC_IMAGE to $tar (disk space?)"
      rm -f -- "$tar.partial"
      return 1
    fi
  fi
  size=$(stat -c %s -- "$tar")
  SPARKC_PIECE_SRC=() SPARKC_PIECE_START=() SPARKC_PIECE_LEN=() SPARKC_PIECE_DEST=() SPARKC_PIECE_FILE=()
  dir=$(mktemp -d)
  list=$dir/pieces
  i=0
  while read -r start len; do
    SPARKC_PIECE_SRC[i]=$tar
    SPARKC_PIECE_START[i]=$start
    SPARKC_PIECE_LEN[i]=$len
    SPARKC_PIECE_DEST[i]=$(stage_dir @NODE@)/image-${head_id:7:12}.$i
    printf '%s - %s\n' "$len" "${SPARKC_PIECE_DEST[i]}" >>"$list"
    i=$((i + 1))
  done < <(cut_pieces "$size" "$SPARKC_STREAMS")
  plan_pieces "$list" "${need[@]}" || { rm -rf "$dir"; return 1; }
  start=$SECONDS
  send_pieces "$dir" image "$size" "${need[*]}" || true  # judged by each node's image below
  for node in "${need[@]}"; do
    pieces=()
    for i in "${!SPARKC_PIECE_DEST[@]}"; do
      pieces+=("${SPARKC_PIECE_DEST[i]//@NODE@/$node}")
    done
    # shellcheck disable=SC2016  # expanded by the node's shell
    on_node "$node" sh -c 'cat "$@" | docker load >/dev/null' sparkc-load "${pieces[@]}" 2>>"$dir/stream.load.err" || true
    if [[ $(image_id "$node") == "$head_id" ]]; then
      on_node "$node" rm -f -- "${pieces[@]}" || true
    else
      broken+=("$node")
    fi
  done
  seconds=$((SECONDS - start))
  local status=0
  report_copies image "$dir" "$seconds" "${broken[@]}" -- "${need[@]}" || status=1
  ((status)) || rm -f -- "$tar"
  rm -rf "$dir"
  return "$status"
}

# The head's files of FOLDER, "SIZE PATH" a line (PATH relative), sorted; a name with a line break is refused.
folder_files() { # FOLDER
  (cd -- "$1" && find . -type f -printf '%s %P\0') | LC_ALL=C sort -z -k 2 | tr '\0' '\n' | grep -v '\.sparkc-piece-[0-9]*$'
}

# Files in FOLDER on a node that the head's (sorted relative paths on stdin) lack, but for the pieces and
# partial files of a copy under way: removed once the copy is whole, as a mirror does.
# shellcheck disable=SC2016  # expanded by the node's shell
SPARKC_EXTRAS_PROGRAM='list=$(mktemp) || exit 1
cat >"$list"
cd "$1" 2>/dev/null && find . -type f -printf "%P\n" | LC_ALL=C sort | LC_ALL=C comm -23 - "$list" \
  | grep -v -e "\.partial\$" -e "\.sparkc-piece-[0-9]*\$"
rm -f "$list"'

# On a node: each file of NAMES (lines COUNT PATH) put together from its pieces PATH.sparkc-piece-0.. .
# shellcheck disable=SC2016  # expanded by the node's shell
SPARKC_JOIN_PROGRAM='while read -r count path; do
  set --
  i=0
  while [ "$i" -lt "$count" ]; do set -- "$@" "$path.sparkc-piece-$i"; i=$((i + 1)); done
  cat "$@" >"$path.partial" && mv -f "$path.partial" "$path" && rm -f "$@" || exit 1
done'

# One of the model's folders (ITEM: model, draft) from the head to every node where it differs.
distribute_model() { # ITEM FOLDER
  local item=$1 folder=$2 node need=() dir lines=() sizes=() paths=() sums=() i k total=0 checks extras size path
  lines=()
  [[ -d $folder ]] && mapfile -t lines < <(folder_files "$folder")
  ((${#lines[@]})) || { warn "$item folder $folder is not on the head, $SPARKC_HEAD"; return 1; }
  dir=$(mktemp -d)
  checks=$dir/checks
  for i in "${!lines[@]}"; do
    size=${lines[i]%% *}
    path=${lines[i]#* }
    sizes[i]=$size
    paths[i]=$path
    total=$((total + size))
    printf '%s\n' "$path" >>"$dir/names"
    sums[i]=$(file_sum "$SPARKC_VERIFY" "$folder/$path")
    printf '%s %s %s\n' "$size" "${sums[i]}" "$folder/$path" >>"$checks"
  done
  LC_ALL=C sort -o "$dir/names" "$dir/names"
  SPARKC_HAS_FILE=()
  for node in "${SPARKC_NODES[@]:1}"; do
    node_states "$node" "$checks" || { warn "$node: cannot read its $item folder: $SPARKC_STATES_ERROR"; need+=("$node"); continue; }
    local lacks=0
    for i in "${!SPARKC_STATES[@]}"; do
      if [[ ${SPARKC_STATES[i]} == have ]]; then SPARKC_HAS_FILE[$node|$i]=1; else lacks=$((lacks + 1)); fi
    done
    extras=$(on_node "$node" bash -c "$SPARKC_EXTRAS_PROGRAM" sparkc-extras "$folder" <"$dir/names" | wc -l)
    if ((lacks == 0 && extras == 0)); then
      log "$node: $item folder $folder already matches (file names, sizes and checksums), skipped"
      dry_run || record "$node" "$item" skipped 0 0 - 0
    else
      log "$node: $item folder $folder: $lacks of ${#lines[@]} files to copy$( ((extras == 0)) || echo ", $extras to remove")"
      need+=("$node")
    fi
  done
  ((${#need[@]})) || { rm -rf "$dir"; return 0; }
  say_routes "$item" "${need[@]}"
  dry_run && { rm -rf "$dir"; return 0; }
  # Pieces of about total/streams bytes: a large file is cut into several, so every stream has work.
  local piece=$(((total + SPARKC_STREAMS - 1) / SPARKC_STREAMS)) count list=$dir/pieces joins=() start len
  ((piece >= 1048576)) || piece=1048576
  SPARKC_PIECE_SRC=() SPARKC_PIECE_START=() SPARKC_PIECE_LEN=() SPARKC_PIECE_DEST=() SPARKC_PIECE_FILE=()
  local j
  k=0
  for i in "${!paths[@]}"; do
    count=$(((sizes[i] + piece - 1) / piece))
    ((count >= 1)) || count=1
    ((count == 1)) || joins+=("$count ${paths[i]}")
    j=0
    while read -r start len; do
      SPARKC_PIECE_SRC[k]=$folder/${paths[i]}
      SPARKC_PIECE_START[k]=$start
      SPARKC_PIECE_LEN[k]=$len
      SPARKC_PIECE_FILE[k]=$i
      if ((count == 1)); then
        SPARKC_PIECE_DEST[k]=$folder/${paths[i]}
      else
        SPARKC_PIECE_DEST[k]=$folder/${paths[i]}.sparkc-piece-$j
      fi
      # A file sent whole is its own piece: held only where its checksum matches too.
      printf '%s %s %s\n' "$len" "$( ((count == 1)) && echo "${sums[i]}" || echo -)" "${SPARKC_PIECE_DEST[k]}" >>"$list"
      k=$((k + 1))
      j=$((j + 1))
    done < <(cut_pieces "${sizes[i]}" "$count")
  done
  plan_pieces "$list" "${need[@]}" || { rm -rf "$dir"; return 1; }
  start=$SECONDS
  send_pieces "$dir" "$item" "$total" "${need[*]}" || true  # judged by each node's files below
  local broken=() join
  for node in "${need[@]}"; do
    join=$(for i in "${!paths[@]}"; do
      [[ -n ${SPARKC_HAS_FILE[$node|$i]:-} || ${#joins[@]} -eq 0 ]] && continue
      for words in "${joins[@]}"; do
        [[ ${words#* } == "${paths[i]}" ]] && printf '%s %s\n' "${words%% *}" "$folder/${paths[i]}"
      done
    done)
    [[ -z $join ]] || on_node "$node" sh -c "$SPARKC_JOIN_PROGRAM" <<<"$join" 2>>"$dir/stream.join.err" || true
    if ! node_states "$node" "$checks" || [[ " ${SPARKC_STATES[*]} " == *[0-9]* ]]; then
      broken+=("$node")
      continue
    fi
    on_node "$node" bash -c "$SPARKC_EXTRAS_PROGRAM" sparkc-extras "$folder" <"$dir/names" \
      | while IFS= read -r path; do printf '%s\0' "$folder/$path"; done \
      | on_node "$node" xargs -0 -r rm -f -- || true
  done
  local status=0
  report_copies "$item" "$dir" $((SECONDS - start)) "${broken[@]}" -- "${need[@]}" || status=1
  rm -rf "$dir"
  return "$status"
}

distribute_main() {
  while (($#)); do
    case $1 in
      --dry-run) SPARKC_DRY_RUN=1 ;;
      --image-only) SPARKC_IMAGE_ONLY=1 ;;
      --model-only) SPARKC_MODEL_ONLY=1 ;;
      --star) SPARKC_CHAIN=0 ;;
      --chain) SPARKC_CHAIN=1 ;;
      --verify) SPARKC_VERIFY=full ;;
      --streams)
        [[ ${2:-} =~ ^[1-9][0-9]?$ ]] || { echo "distribute.sh: --streams needs a number from 1 to 99" >&2; exit 2; }
        SPARKC_STREAMS=$2
        shift
        ;;
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
  if ((SPARKC_IMAGE_ONLY && SPARKC_MODEL_ONLY)); then
    echo "distribute.sh: --image-only and --model-only exclude each other" >&2
    exit 2
  fi
  dry_run || ssh_mux_start  # after the options: a dry run opens no connection
  local status=0 node before=$SPARKC_HEAD
  for node in "${SPARKC_NODES[@]:1}"; do
    SPARKC_KEY_NAME[$node]=$(host_key_name "$node")
    if ((SPARKC_CHAIN)); then
      SPARKC_ROUTE_FROM[$node]=$before
      SPARKC_ROUTE_VIA[$node]=${SPARKC_FABRIC_TARGET[$node]}
      before=$node
    else
      SPARKC_ROUTE_FROM[$node]=${SPARKC_COPY_FROM[$node]}
      SPARKC_ROUTE_VIA[$node]=${SPARKC_COPY_VIA[$node]}
    fi
  done
  local unrecorded=0
  for node in "${SPARKC_NODES[@]:1}"; do
    [[ ${SPARKC_ROUTE_FROM[$node]} == "$SPARKC_HEAD" ]] && continue
    SPARKC_KNOWN[$node]=$(known_lines "$node")
    [[ -n ${SPARKC_KNOWN[$node]} ]] || dry_run || {
      warn "$node: its copies come from ${SPARKC_ROUTE_FROM[$node]}, which checks its host key against this machine's record of it, and there is none under ${SPARKC_KEY_NAME[$node]}: connect once with ssh ${SPARKC_TARGET[$node]} and compare the fingerprint"
      unrecorded=1
    }
  done
  if ((unrecorded)); then
    reach_direct_nodes
    exit 1
  fi
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
