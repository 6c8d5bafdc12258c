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
      || warn "$node: cannot be reached: $(ssh_said "$node" "$err")"
  done
  rm -f "$err"
}

# What ssh said (the start of FILE, on one line) when it could not run a command on NODE, with the fix where
# it refused a host key.
ssh_said() { # NODE FILE
  printf '%s%s' "$(head -c 300 "$2" | tr '\r\n' '  ')" "$(key_hint "$1" "$2")"
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
# so far (one copy: each node it feeds gets the same), of the total in DIR/size.* (the image's estimated by
# docker until its archive is saved). It ends within a second of the copies.
copy_progress() { # WHAT LABEL DIR
  local what=$1 label=$2 dir=$3 start=$SECONDS waited=0 sent percent pid alive total
  while :; do
    alive=0
    for pid in "${SPARKC_COPIES[@]}"; do
      kill -0 "$pid" 2>/dev/null && alive=1
    done
    ((alive)) || return 0
    sleep 1
    ((++waited % SPARKC_PROGRESS_EVERY)) && continue
    sent=$(sent_total "$dir")
    total=$(cat "$dir"/size.* 2>/dev/null | awk '{ n += $1 } END { print n + 0 }')
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
report_copies() { # ITEM SECONDS
  local item=$1 seconds=$2 node action status=0 errs
  for node in ${SPARKC_NEED[$item]}; do
    if [[ $(cat "$SPARKC_WORK/finish.$node|$item" 2>/dev/null) != ok ]]; then
      errs=("$SPARKC_WORK"/stream.*.err "$SPARKC_WORK/finish.$node|$item.err")
      [[ $item != image ]] || errs+=("$SPARKC_WORK/load.$node.err")
      warn "$node: $item copy failed: $(cat "${errs[@]}" 2>/dev/null | tail -n 3 | tr '\n' ' ')$(key_hint "$node" "${errs[@]}")"
      status=1
      continue
    fi
    local got=${SPARKC_RECEIVES[$node|$item]:-0} had=${SPARKC_RESUMED[$node|$item]:-0}
    action=copied
    ((had == 0)) || action=resumed
    log "$node: $item $action, $got bytes in ${seconds}s ($(rate "$got" "$seconds")) from ${SPARKC_ROUTE_FROM[$node]}$( ((had == 0)) || echo ", $had bytes there already")"
    record "$node" "$item" "$action" "$got" "$seconds" "${SPARKC_ROUTE_FROM[$node]}" "$had"
  done
  return "$status"
}

image_id() { on_node "$1" docker image inspect --format '{{.Id}}' "$SPARKC_IMAGE" 2>/dev/null || true; }

# What one pass copies, found by survey_image and survey_folder (a dry run stops there): per ITEM (image,
# model, draft) the nodes that lack it (SPARKC_NEED, space-separated) and a folder item's head folder. The
# pass's files live in SPARKC_WORK on the head: ITEM.plan (the pieces, plan_pieces' PLAN), ITEM.held.NODE
# (what a node holds of each), and what each step below names.
SPARKC_ITEMS=()
declare -A SPARKC_NEED=() SPARKC_FOLDER=()
SPARKC_WORK=""
SPARKC_HEAD_ID=""

# Runs `FUNCTION NODE` for each NODE at once, stdin from DIR/NAME.in where there is one: its stdout in
# DIR/NAME.NODE, stderr in DIR/NAME.NODE.err, exit status in DIR/NAME.NODE.rc. Returns when all ended.
# (launch.sh's at_once gives no stdin and keeps stderr with stdout, which these answers must not carry.)
for_nodes() { # NAME FUNCTION NODE...
  local name=$1 func=$2 node input pids=()
  shift 2
  input=$SPARKC_WORK/$name.in
  [[ -e $input ]] || input=/dev/null
  for node; do
    (
      status=0
      "$func" "$node" <"$input" >"$SPARKC_WORK/$name.$node" 2>"$SPARKC_WORK/$name.$node.err" || status=$?
      echo "$status" >"$SPARKC_WORK/$name.$node.rc"
    ) &
    pids+=($!)
  done
  for node in "${pids[@]}"; do
    wait "$node" || true
  done
}

# Pieces of about a quarter of what each stream carries: streams that free up take the next, so they end
# together; at least 1 MiB. A piece is named by its first byte, so one kept from a run that cut otherwise
# is never taken for another.
piece_size() { # TOTAL
  local piece=$((($1 + 4 * SPARKC_STREAMS - 1) / (4 * SPARKC_STREAMS)))
  ((piece >= 1048576)) || piece=1048576
  echo "$piece"
}

image_survey_on() { on_node_copy "$1" image_survey "$SPARKC_IMAGE" "$(stage_dir "$1")"; }

# Which nodes lack the head's image; what each holds in its staging folder (DIR/stage.NODE).
survey_image() {
  local node id need=()
  SPARKC_HEAD_ID=$(image_id "$SPARKC_HEAD")
  [[ -n $SPARKC_HEAD_ID ]] || { warn "image $SPARKC_IMAGE is not on the head, $SPARKC_HEAD: pull it there first"; return 1; }
  for_nodes image image_survey_on "${SPARKC_NODES[@]:1}"
  for node in "${SPARKC_NODES[@]:1}"; do
    id=$(head -n 1 "$SPARKC_WORK/image.$node")
    tail -n +2 "$SPARKC_WORK/image.$node" >"$SPARKC_WORK/stage.$node"
    if [[ $id == "$SPARKC_HEAD_ID" ]]; then
      log "$node: image $SPARKC_IMAGE ${SPARKC_HEAD_ID:7:12} already there, skipped"
      dry_run || record "$node" image skipped 0 0 - 0
    else
      if [[ -n $id ]]; then log "$node: image ${id:7:12} differs: copy"; else log "$node: image missing: copy"; fi
      need+=("$node")
    fi
  done
  ((${#need[@]})) || return 0
  say_routes image "${need[@]}"
  SPARKC_ITEMS+=(image)
  SPARKC_NEED[image]=${need[*]}
}

# The head's files of FOLDER, "SIZE PATH" a line (PATH relative), sorted; a name with a line break is refused.
folder_files() { # FOLDER
  (cd -- "$1" && find . -type f -printf '%s %P\0') | LC_ALL=C sort -z -k 2 | tr '\0' '\n' | grep -v '\.sparkc-piece-[0-9]*$'
}

folder_survey_on() { on_node_copy "${1%|*}" folder_survey "$SPARKC_VERIFY" "${SPARKC_FOLDER[${1#*|}]}"; } # NODE|ITEM

# One of the model's folders (ITEM: model, draft): which nodes lack it, and what each holds of its pieces.
# Writes into SPARKC_WORK: ITEM.files ("SIZE SUM PATH" a line, PATH relative), ITEM.checks (piece_states'
# lines for the whole files), ITEM.plan (the pieces: a file larger than a piece is cut, and joined on each
# node after the pass from ITEM.joins' lines "INDEX START,START,... PATH"), ITEM.held.NODE, and
# ITEM.extras.NODE (files a node has that the head lacks, removed once the copy is whole, as a mirror does).
survey_folder() { # ITEM FOLDER
  local item=$1 folder=$2 node need=() lines=() i size path sum total=0 piece count start len starts extras lacks
  [[ -d $folder ]] && mapfile -t lines < <(folder_files "$folder")
  ((${#lines[@]})) || { warn "$item folder $folder is not on the head, $SPARKC_HEAD"; return 1; }
  SPARKC_FOLDER[$item]=$folder
  for i in "${!lines[@]}"; do
    total=$((total + ${lines[i]%% *}))
  done
  piece=$(piece_size "$total")
  local w=$SPARKC_WORK/$item
  for i in "${!lines[@]}"; do
    size=${lines[i]%% *}
    path=${lines[i]#* }
    sum=$(file_sum "$SPARKC_VERIFY" "$folder/$path")
    printf '%s %s %s\n' "$size" "$sum" "$path" >>"$w.files"
    printf '%s %s %s\n' "$size" "$sum" "$folder/$path" >>"$w.checks"
    printf '%s\n' "$path" >>"$w.names"
    count=$(((size + piece - 1) / piece))
    if ((count <= 1)); then
      printf '0 %s %s %s %s\n' "$size" "$i" "$sum" "$folder/$path" >>"$w.plan"
      continue
    fi
    starts=""
    while read -r start len; do
      printf '%s %s %s - %s\n' "$start" "$len" "$i" "$folder/$path.sparkc-piece-$start" >>"$w.plan"
      printf '%s - %s\n' "$len" "$folder/$path.sparkc-piece-$start" >>"$w.cut"
      starts+=${starts:+,}$start
    done < <(cut_pieces "$size" "$count")
    printf '%s %s %s\n' "$i" "$starts" "$folder/$path" >>"$w.joins"
  done
  echo "$total" >"$SPARKC_WORK/size.$item"
  LC_ALL=C sort -o "$w.names" "$w.names"
  cat "$w.checks" "$w.cut" 2>/dev/null >"$SPARKC_WORK/folder.in"
  local workers=("${SPARKC_NODES[@]:1}")
  for_nodes folder folder_survey_on "${workers[@]/%/|$item}"
  rm -f "$SPARKC_WORK/folder.in"
  for node in "${SPARKC_NODES[@]:1}"; do
    local out=$SPARKC_WORK/folder.$node\|$item states=()
    if [[ $(<"$out.rc") != 0 ]]; then
      warn "$node: cannot read its $item folder: $(ssh_said "$node" "$out.err")"
      : >"$w.extras.$node"
      need+=("$node")
      continue
    fi
    mapfile -t states < <(sed '/^--$/,$d' "$out")
    lacks=0
    for i in "${!lines[@]}"; do
      if [[ ${states[i]:-} == have ]]; then SPARKC_HAS_FILE[$node|$item|$i]=1; else lacks=$((lacks + 1)); fi
    done
    # What the node holds of each piece: a whole file's state, or the cut piece's, in plan order.
    local k=${#lines[@]}
    while read -r _ _ i sum _; do
      if [[ $sum == - ]]; then
        printf '%s\n' "${states[k]:-0}"
        k=$((k + 1))
      else
        printf '%s\n' "${states[i]:-0}"
      fi
    done <"$w.plan" >"$w.held.$node"
    # The node's files the head lacks, but for a copy's pieces and partial files (and no path that climbs).
    sed '1,/^--$/d' "$out" | LC_ALL=C sort | LC_ALL=C comm -23 - "$w.names" \
      | grep -v -e '\.partial$' -e '\.sparkc-piece-[0-9]*$' -e '^/' -e '^\.\./' -e '/\.\./' -e '/\.\.$' >"$w.extras.$node" || true
    extras=$(wc -l <"$w.extras.$node")
    if ((lacks == 0 && extras == 0)); then
      log "$node: $item folder $folder already matches (file names, sizes and checksums), skipped"
      dry_run || record "$node" "$item" skipped 0 0 - 0
    else
      log "$node: $item folder $folder: $lacks of ${#lines[@]} files to copy$( ((extras == 0)) || echo ", $extras to remove")"
      need+=("$node")
    fi
  done
  ((${#need[@]})) || return 0
  say_routes "$item" "${need[@]}"
  SPARKC_ITEMS+=("$item")
  SPARKC_NEED[$item]=${need[*]}
}

plan_folder() { # ITEM
  local item=$1 need=() size sum path
  read -ra need <<<"${SPARKC_NEED[$item]}"
  SPARKC_PLAN_SRC=()
  while read -r size sum path; do
    SPARKC_PLAN_SRC+=("${SPARKC_FOLDER[$item]}/$path")
  done <"$SPARKC_WORK/$item.files"
  plan_pieces "$SPARKC_WORK" queue.files "$item" "$SPARKC_WORK/$item.plan" "${need[@]}"
}

# The archive docker save writes, kept on the head until every node loaded it, so a resumed copy sends the
# same bytes.
image_archive() { printf '%s/image-%s.tar' "$(stage_dir "$SPARKC_HEAD")" "${SPARKC_HEAD_ID#sha256:}"; }

save_image() {
  local tar
  tar=$(image_archive)
  [[ ! -f $tar ]] || return 0
  log "saving $SPARKC_IMAGE to $tar"
  if ! { mkdir -p -- "${tar%/*}" && docker save -o "$tar.partial" "$SPARKC_IMAGE" && mv -f -- "$tar.partial" "$tar"; }; then
    warn "cannot save $SPARKC_IMAGE to $tar (disk space?)"
    rm -f -- "$tar.partial"
    return 1
  fi
}

# The image's pieces on a node, in order.
image_pieces() { # NODE
  local _ dest
  while read -r _ _ _ _ dest; do
    printf '%s\n' "${dest//@NODE@/$1}"
  done <"$SPARKC_WORK/image.plan"
}

# Queues the image's pieces, in order (each node loads them while they arrive), with what each node's
# staging folder holds of them (DIR/stage.NODE: "SIZE NAME" a line).
plan_image() {
  local tar size start len name node piece need=()
  read -ra need <<<"${SPARKC_NEED[image]}"
  tar=$(image_archive)
  size=$(stat -c %s -- "$tar") || return 1
  piece=$(piece_size "$size")
  while read -r start len; do
    printf '%s %s 0 - %s\n' "$start" "$len" "$(stage_dir @NODE@)/image-${SPARKC_HEAD_ID:7:12}.$start" >>"$SPARKC_WORK/image.plan"
  done < <(cut_pieces "$size" $(((size + piece - 1) / piece)))
  for node in "${need[@]}"; do
    local -A has=()
    while read -r len name; do
      has[$name]=$len
    done <"$SPARKC_WORK/stage.$node"
    while read -r _ len _ _ name; do
      name=${name##*/}
      if [[ ${has[$name]:-} == "$len" ]]; then echo have; else echo "${has[$name.partial]:-0}"; fi
    done <"$SPARKC_WORK/image.plan" >"$SPARKC_WORK/image.held.$node"
    unset has
  done
  echo "$size" >"$SPARKC_WORK/size.image"
  SPARKC_PLAN_SRC=("$tar")
  plan_pieces "$SPARKC_WORK" queue.image image "$SPARKC_WORK/image.plan" "${need[@]}"
}

# Starts each node's loader (its process ID in SPARKC_LOADER, the pipe that keeps it waiting in
# SPARKC_LOADER_FD): the node loads the image while its pieces arrive.
declare -A SPARKC_LOADER=() SPARKC_LOADER_FD=()
start_loaders() {
  local node fd pieces=()
  for node in ${SPARKC_NEED[image]}; do
    mapfile -t pieces < <(image_pieces "$node")
    mkfifo "$SPARKC_WORK/load.$node"
    on_node_copy "$node" load_pieces "${pieces[@]}" <"$SPARKC_WORK/load.$node" >/dev/null 2>"$SPARKC_WORK/load.$node.err" &
    SPARKC_LOADER[$node]=$!
    exec {fd}>"$SPARKC_WORK/load.$node"
    SPARKC_LOADER_FD[$node]=$fd
  done
}

# Once the streams ended: tells each loader nothing more comes, and waits for it.
end_loaders() {
  local node fd
  for node in "${!SPARKC_LOADER_FD[@]}"; do
    fd=${SPARKC_LOADER_FD[$node]}
    exec {fd}>&-
  done
  for node in "${!SPARKC_LOADER[@]}"; do
    wait "${SPARKC_LOADER[$node]}" || true # judged by the node's image ID
  done
}

# After the pass, on NODE, ITEM (NODE|ITEM): the image's ID or the folder's files checked (the files cut
# into pieces joined first), the leftovers removed; "ok" or "broken".
finish_on() { # NODE|ITEM
  local node=${1%|*} item=${1#*|} pieces=()
  if [[ $item == image ]]; then
    mapfile -t pieces < <(image_pieces "$node")
    on_node_copy "$node" image_finish "$SPARKC_IMAGE" "$SPARKC_HEAD_ID" "$(stage_dir "$node")" "${pieces[@]}"
    return
  fi
  local w=$SPARKC_WORK/$item states i starts path
  states=$({
    while read -r i starts path; do
      [[ -n ${SPARKC_HAS_FILE[$node|$item|$i]:-} ]] || printf '%s %s\n' "$starts" "$path"
    done < <(cat "$w.joins" 2>/dev/null)
    echo --
    cat "$w.checks"
    echo --
    cat "$w.extras.$node"
  } | on_node_copy "$node" folder_finish "$SPARKC_VERIFY" "${SPARKC_FOLDER[$item]}") || return 1
  [[ $states != *[0-9]* && $(wc -l <<<"$states") == $(wc -l <"$w.checks") ]] && echo ok || echo broken
}

# Copies every item of SPARKC_ITEMS in one pass: the folders' pieces start at once while the head saves the
# image's archive, whose pieces then go first; each node loads the image as its pieces arrive. Then every
# node and item is checked at once, and each reported.
copy_pass() {
  local item node nodes=() saver="" status=0 start seconds roots what checks=()
  for item in "${SPARKC_ITEMS[@]}"; do
    for node in ${SPARKC_NEED[$item]}; do
      [[ " ${nodes[*]} " == *" $node "* ]] || nodes+=("$node")
      checks+=("$node|$item")
    done
  done
  ((${#nodes[@]})) || return 0
  roots=$SPARKC_STAGE_ROOT/$SPARKC_DEPLOYMENT
  for item in "${SPARKC_ITEMS[@]}"; do
    [[ -z ${SPARKC_FOLDER[$item]:-} ]] || roots+=$'\n'${SPARKC_FOLDER[$item]}
  done
  what=$(IFS=,; echo "${SPARKC_ITEMS[*]}")
  what=${what//,/ and }
  start=$SECONDS
  if [[ -n ${SPARKC_NEED[image]:-} ]]; then
    [[ -f $(image_archive) ]] || docker image inspect --format '{{.Size}}' "$SPARKC_IMAGE" >"$SPARKC_WORK/size.image" 2>/dev/null || true
    save_image &
    saver=$!
  fi
  for item in "${SPARKC_ITEMS[@]}"; do
    [[ $item == image ]] || plan_folder "$item"
  done
  publish_pieces "$SPARKC_WORK" queue.files
  start_streams "$SPARKC_WORK" "$roots" "${nodes[@]}"
  copy_progress "$what" "${nodes[*]}" "$SPARKC_WORK" &
  local watcher=$!
  if [[ -n $saver ]] && wait "$saver" && plan_image; then
    publish_pieces "$SPARKC_WORK" queue.image
    start_loaders
  fi
  publish_pieces "$SPARKC_WORK" queue.files close
  local pid
  for pid in "${SPARKC_COPIES[@]}"; do
    wait "$pid" || true # judged by each node's checks below
  done
  wait "$watcher" || true
  end_loaders
  for_nodes finish finish_on "${checks[@]}"
  seconds=$((SECONDS - start))
  for item in "${SPARKC_ITEMS[@]}"; do
    report_copies "$item" "$seconds" || status=1
  done
  # The head's archive goes once every node holds the image.
  [[ -z $saver || $status != 0 ]] || { rm -f -- "$(image_archive)"; rmdir -- "$(stage_dir "$SPARKC_HEAD")" "$(stage_dir "")" 2>/dev/null || true; }
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
  SPARKC_WORK=$(mktemp -d) || exit 1
  SPARKC_SCRATCH=$SPARKC_WORK  # removed on exit, however the script ends
  if ((SPARKC_MODEL_ONLY == 0)); then
    log "== image $SPARKC_IMAGE"
    survey_image || status=1
  fi
  if ((SPARKC_IMAGE_ONLY == 0)); then
    log "== model folder $SPARKC_MODEL_HOST_PATH"
    survey_folder model "$SPARKC_MODEL_HOST_PATH" || status=1
    if [[ -n $SPARKC_DRAFT_FOLDER ]]; then
      log "== draft model folder $SPARKC_DRAFT_FOLDER"
      survey_folder draft "$SPARKC_DRAFT_FOLDER" || status=1
    fi
  fi
  if ! dry_run && ((${#SPARKC_ITEMS[@]})); then
    log "== copying the $(IFS=,; a="${SPARKC_ITEMS[*]}"; echo "${a//,/, }") in one pass"
    copy_pass || status=1
  fi
  dry_run || log "report: $SPARKC_REPORT"
  return "$status"
}
