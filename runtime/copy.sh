# Copies along the routes deployment.sh compiles (SPARKC_COPY_FROM, SPARKC_COPY_VIA), in one pass for the
# image and the model's folders: what is copied is cut into pieces (byte ranges of the image's archive or of
# a weights file), and several streams (--streams) each carry piece after piece down the tree of routes, every
# node writing what it lacks while passing it on to the nodes it feeds. So a node two cables from the head
# receives at the pace of its neighbour, and the control network carries no copy where a cable path exists.
# A stream is one ssh connection per hop, kept for the whole pass, over one of its route's ways (a cable's
# twins), because one ssh stream rarely fills a link: its cipher runs on one core. Streams take the next
# piece as they free up, the image's first once its archive is saved, so they end together; each node loads
# the image while its pieces arrive. A node keeps a piece's bytes in PIECE.partial and renames it to PIECE
# once whole, so an interrupted copy resumes where the pieces end.

# 8 streams: one ssh stream's cipher runs on one core at about 2 GB/s (openssl speed, AES-128-GCM and
# ChaCha20-Poly1305 alike), and a CX-7 link carries about 14 GB/s (docs/performance.md).
SPARKC_STREAMS=8
SPARKC_VERIFY=ends # ends: sha256 of each file's first and last MiB; full (--verify): of all of it
# ssh's ciphers for the copies: AES-GCM first (a Spark's Arm cores have AES instructions), ChaCha20 where
# the node offers no AES-GCM; the spec's own Ciphers option wins (ssh takes the first value it is given).
SPARKC_COPY_SSH=(-o "Ciphers=aes128-gcm@openssh.com,aes256-gcm@openssh.com,chacha20-poly1305@openssh.com" -o Compression=no)
declare -A SPARKC_KEY_NAME=() # per node: the name its host key is known under (HostKeyAlias)
# The routes this run copies along: the compiled ones (SPARKC_COPY_FROM, SPARKC_COPY_VIA), or --chain's.
declare -A SPARKC_ROUTE_FROM=() SPARKC_ROUTE_VIA=()
declare -A SPARKC_KNOWN=() # per node another node sends to: the head's known_hosts lines for its key (base64)

# The head's known_hosts lines for NODE's host key name, in the files ssh reads for it (ssh -G), as base64.
known_lines() { # NODE
  local file files=()
  mapfile -t files < <(ssh -G "${SPARKC_SSH_OPTS[@]}" "${SPARKC_TARGET[$1]}" 2>/dev/null \
    | awk '$1 == "userknownhostsfile" || $1 == "globalknownhostsfile" { for (i = 2; i <= NF; i++) print $i }')
  for file in "${files[@]}"; do
    file=${file/#\~/$HOME}
    [[ -r $file ]] || continue
    ssh-keygen -F "${SPARKC_KEY_NAME[$1]}" -f "$file" 2>/dev/null | grep -v '^#' || true
  done | base64 -w 0
}

# One node's part of a stream: frames on stdin, each a header line "OFFSET LENGTH WRITERS DEST" and then
# the piece's bytes from OFFSET to LENGTH. A node among WRITERS (comma-separated) appends them to
# DEST.partial (DEST with @NODE@ for its name; truncated to OFFSET first, renamed DEST once LENGTH bytes
# long); each node it feeds on the way to a writer gets the frame too. DEST must lie under one of ROOTS
# (newline-separated folders), so no frame writes anywhere else. The program's own text arrives as $0 on
# the nodes (bash -c TEXT TEXT ARGS), so each hop hands it on. ROUTE: NODE|FROM|WAYS|KEY-NAME|KNOWN, WAYS
# the user@address list (comma-separated) the stream picks from by its number, KEY-NAME the node's
# HostKeyAlias, KNOWN (base64) the head's known_hosts lines for KEY-NAME where another node than the head
# sends to it.
relay() { # HERE STREAM COUNT OPTS... ROOTS ROUTE...
  local here=$1 tmp roots status=0 children=() pids=()
  local -A parent=() fd_of=()
  relay_open "$@" || return 1
  local header offset length writers dest rest root inside targets child n
  while IFS= read -r header; do
    offset=${header%% *} rest=${header#* }
    length=${rest%% *} rest=${rest#* }
    writers=${rest%% *} dest=${rest#* }
    inside=0
    while IFS= read -r root; do
      [[ -n $root && $dest == "$root"/* ]] && inside=1
    done <<<"$roots"
    if ! [[ $offset =~ ^[0-9]+$ && $length =~ ^[0-9]+$ && $writers =~ ^[A-Za-z0-9._,-]+$ ]] \
      || ((offset > length)) || ((inside == 0)) || [[ $dest == */../* || $dest == */.. ]]; then
      echo "$here: a frame of the copy does not parse (header: ${header:0:200}): stopped" >&2
      status=1
      break
    fi
    relay_header "$header" "$writers" || { status=1; break; }
    n=$((length - offset))
    if [[ ,$writers, == *,"$here",* ]]; then
      dest=${dest//@NODE@/$here}
      if ! { mkdir -p -- "${dest%/*}" && truncate -s "$offset" -- "$dest.partial"; }; then
        status=1
        break
      fi
      if ((${#targets[@]})); then
        frame_bytes "$n" | tee -a -- "$dest.partial" "${targets[@]}" >/dev/null || { status=1; break; }
      else
        frame_bytes "$n" >>"$dest.partial" || { status=1; break; }
      fi
      if ! { [[ $(stat -c %s -- "$dest.partial") == "$length" ]] && mv -f -- "$dest.partial" "$dest"; }; then
        status=1
        break
      fi
    elif ((${#targets[@]} == 1)); then
      frame_bytes "$n" >"${targets[0]}" || { status=1; break; }
    else
      frame_bytes "$n" | tee -- "${targets[@]}" >/dev/null || { status=1; break; }
    fi
  done
  relay_close || status=1
  return "$status"
}

# The next N bytes of stdin, and not one more (the next frame's header follows), in blocks of 1 MiB: the
# fewer reads and writes, the less CPU a copy takes.
frame_bytes() { # N
  dd bs=1M iflag=fullblock,count_bytes count="$1" status=none
}

# Opens one ssh stream to each node HERE feeds (by the routes), which runs relay there, each fed from a
# pipe: sets the caller's children, fd_of (by node: the pipe's file descriptor), parent (by node: the node
# it receives from), pids, tmp and roots.
relay_open() { # HERE STREAM COUNT OPTS... ROOTS ROUTE...
  local here=$1 stream=$2 count=$3
  shift 3
  local opts=("${@:1:count}")
  shift "$count"
  roots=$1
  shift
  local program=${SPARKC_RELAY_PROGRAM:-$0} route node from ways key known fd ways_list
  tmp=$(mktemp -d) || return 1
  for route; do
    IFS='|' read -r node from ways key known <<<"$route"
    parent[$node]=$from
    [[ $from == "$here" ]] || continue
    IFS=, read -ra ways_list <<<"$ways"
    mkfifo "$tmp/$node" || return 1
    # A hop from a node checks the next one's host key against the head's record of it (KNOWN), so a
    # node passing copies on needs no record of its own, and still refuses a key the head does not know.
    local checked=()
    if [[ -n $known ]]; then
      printf '%s' "$known" | base64 -d >"$tmp/$node.known" || return 1
      checked=(-o "UserKnownHostsFile=$tmp/$node.known" -o StrictHostKeyChecking=yes)
    fi
    ssh -o "HostKeyAlias=$key" "${checked[@]}" "${opts[@]}" "${ways_list[stream % ${#ways_list[@]}]}" -- \
      "$(sh_quote bash -c "$program" "$program" "$node" "$stream" "$count" "${opts[@]}" "$roots" "$@")" \
      <"$tmp/$node" >/dev/null &
    pids+=($!)
    exec {fd}>"$tmp/$node"
    fd_of[$node]=$fd
    children+=("$node")
  done
}

# Sends a frame's HEADER to each child on the way to one of WRITERS; their pipes (as /dev/fd paths) in
# the caller's targets.
relay_header() { # HEADER WRITERS
  local child
  targets=()
  for child in "${children[@]}"; do
    carries "$child" "$2" || continue
    printf '%s\n' "$1" >&"${fd_of[$child]}" || return 1
    targets+=("/dev/fd/${fd_of[$child]}")
  done
}

# Closes the pipes relay_open made and waits for its ssh streams; fails when one did.
relay_close() {
  local child fd status=0
  for child in "${children[@]}"; do
    fd=${fd_of[$child]}
    exec {fd}>&-
  done
  for fd in "${pids[@]}"; do
    wait "$fd" || status=1
  done
  rm -rf "$tmp"
  return "$status"
}

# Whether CHILD is on the way from the relay's node (here, parent: relay's) to one of WRITERS.
carries() { # CHILD WRITERS
  local writer node hops
  local -a wanted
  IFS=, read -ra wanted <<<"$2"
  for writer in "${wanted[@]}"; do
    node=$writer
    for ((hops = 0; hops < 64; hops++)); do
      [[ -n $node && $node != "$here" ]] || break
      [[ $node == "$1" ]] && return 0
      node=${parent[$node]:-}
    done
  done
  return 1
}
SPARKC_RELAY_PROGRAM="$(declare -f sh_quote relay relay_open relay_header relay_close carries frame_bytes)
relay \"\$@\""
readonly SPARKC_RELAY_PROGRAM

# sha256 of FILE: of its first and last MiB (ends), or of all of it (full).
file_sum() { # MODE FILE
  if [[ $1 == full ]]; then
    sha256sum <"$2"
  else
    { head -c 1048576 -- "$2" && tail -c 1048576 -- "$2"; } | sha256sum
  fi | cut -d ' ' -f 1
}

# For each line LENGTH SUM PATH on stdin, what a node holds: "have" where PATH has LENGTH bytes (and, SUM
# other than -, that file_sum), else the bytes of PATH.partial so far (0: none).
piece_states() { # MODE
  local length sum path size
  while read -r length sum path; do
    size=$(stat -c %s -- "$path" 2>/dev/null) || size=""
    if [[ $size == "$length" ]] && { [[ $sum == - ]] || [[ $(file_sum "$1" "$path") == "$sum" ]]; }; then
      echo have
    else
      stat -c %s -- "$path.partial" 2>/dev/null || echo 0
    fi
  done
}

# The programs distribute.sh runs on the nodes, each a function given as the first word:
# On a node: the image's ID there (a line, empty where it has none), then "SIZE NAME" for each file in its
# staging folder.
image_survey() { # IMAGE STAGE
  local id
  id=$(docker image inspect --format '{{.Id}}' "$1" 2>/dev/null) || id=""
  printf '%s\n' "${id%%$'\n'*}"
  find "$2" -maxdepth 1 -type f -printf '%s %f\n' 2>/dev/null || true
}

# On a node: piece_states for the lines on stdin, a line "--", then the files under FOLDER (relative paths).
folder_survey() { # MODE FOLDER
  piece_states "$1"
  echo --
  if cd -- "$2" 2>/dev/null; then find . -type f -printf '%P\n'; fi
}

# On a node after the pass: joins each file of the lines "START,START,... PATH" on stdin (up to a line "--")
# from its pieces PATH.sparkc-piece-START, then writes piece_states for the whole files' lines that follow
# (up to "--"); where every file is whole, removes the files named by the lines after that (relative to
# FOLDER: files the head lacks) and the pieces left by earlier runs.
folder_finish() { # MODE FOLDER
  local mode=$1 folder=$2 line starts path start states whole
  local -a firsts pieces
  while IFS= read -r line && [[ $line != -- ]]; do
    starts=${line%% *} path=${line#* }
    IFS=, read -ra firsts <<<"$starts"
    pieces=()
    whole=1
    for start in "${firsts[@]}"; do
      pieces+=("$path.sparkc-piece-$start")
      [[ -e $path.sparkc-piece-$start ]] || whole=0
    done
    ((whole)) || continue
    { cat -- "${pieces[@]}" >"$path.partial" && mv -f -- "$path.partial" "$path" && rm -f -- "${pieces[@]}"; } || true
  done
  states=$(while IFS= read -r line && [[ $line != -- ]]; do printf '%s\n' "$line"; done | piece_states "$mode")
  printf '%s\n' "$states"
  [[ $states != *[0-9]* ]] || return 0
  while IFS= read -r path; do
    rm -f -- "$folder/$path"
  done
  find "$folder" -type f -name '*.sparkc-piece-*' -delete 2>/dev/null || true
}

# On a node after the pass: "ok" where the image is HEAD-ID (its pieces, of any cut, and the folders left
# empty then go), else "broken"; where every piece is whole and still not this image, their bytes are not
# the archive's (it was saved anew), so they go too and the next run sends them again.
image_finish() { # IMAGE HEAD-ID STAGE PIECE...
  local image=$1 want=$2 stage=$3 id piece
  shift 3
  id=$(docker image inspect --format '{{.Id}}' "$image" 2>/dev/null) || id=""
  if [[ ${id%%$'\n'*} == "$want" ]]; then
    rm -f -- "$stage/image-${want:7:12}".*
    rmdir -- "$stage" "${stage%/*}" 2>/dev/null || true
    echo ok
    return 0
  fi
  for piece; do
    [[ -e $piece ]] || { echo broken; return 0; }
  done
  rm -f -- "$@"
  echo broken
}

# On a node: each of the image's pieces in turn, as it arrives, into docker load. Once stdin ends (the
# head's streams are done), a piece still missing is an error.
load_pieces() { # PIECE...
  local piece rc
  for piece; do
    while [[ ! -e $piece ]]; do
      rc=0
      read -r -t 1 _ || rc=$?
      if ((rc > 0 && rc <= 128)) && [[ ! -e $piece ]]; then
        echo "the image's piece $piece did not arrive" >&2
        return 1
      fi
    done
    cat -- "$piece" || return 1
  done | docker load >/dev/null
}
SPARKC_NODE_PROGRAM="set -o pipefail
$(declare -f file_sum piece_states image_survey folder_survey folder_finish image_finish load_pieces)
\"\$@\""
readonly SPARKC_NODE_PROGRAM

# Runs one of the node programs on NODE (as on_node does: stdin and stdout pass through).
on_node_copy() { # NODE FUNCTION ARGS...
  local node=$1
  shift
  on_node "$node" bash -c "$SPARKC_NODE_PROGRAM" sparkc-copy "$@"
}

# The route to NODE as relay reads it.
route_word() { # NODE
  local ways=${SPARKC_ROUTE_VIA[$1]}
  printf '%s|%s|%s|%s|%s' "$1" "${SPARKC_ROUTE_FROM[$1]}" "${ways// /,}" "${SPARKC_KEY_NAME[$1]}" \
    "${SPARKC_KNOWN[$1]:-}"
}

# NODE and the nodes between it and the head, nearest first.
route_path() { # NODE
  local node=$1
  while [[ $node != "$SPARKC_HEAD" ]]; do
    printf '%s\n' "$node"
    node=${SPARKC_ROUTE_FROM[$node]}
  done
}

# The pieces' number N cut out of SIZE bytes, each SIZE/N or one more: "START LENGTH" a line.
cut_pieces() { # SIZE N
  local size=$1 n=$2 i
  ((n >= 1)) || n=1
  for ((i = 0; i < n; i++)); do
    printf '%d %d\n' $((size * i / n)) $((size * (i + 1) / n - size * i / n))
  done
}

# The pass's pieces live in files under the pass's folder (DIR): piece.K holds, a line each, the file the
# bytes come from on the head, its first byte, the offset the writers resume from, the length, the writers
# (comma-separated) and where each keeps them (@NODE@ for its name). Two queues of piece numbers, the
# image's (taken first) and the folders' (queue.image, queue.files), each with the count taken so far
# (NAME.taken); queue.closed once nothing more will be queued. flock keeps the streams from taking one
# piece twice.
SPARKC_PIECE_COUNT=0
queue_piece() { # DIR QUEUE SRC START OFFSET LENGTH WRITERS DEST
  local dir=$1 queue=$2
  shift 2
  printf '%s\n' "$@" >"$dir/piece.$SPARKC_PIECE_COUNT"
  printf '%s\n' "$SPARKC_PIECE_COUNT" >>"$dir/$queue.new"
  SPARKC_PIECE_COUNT=$((SPARKC_PIECE_COUNT + 1))
}

# Hands the pieces queued since the last call to the streams: the image's in order (each node loads them
# as they arrive), the folders' largest first (the last to be taken are then the small ones, so the streams
# end close together); CLOSE: nothing more will come.
publish_pieces() { # DIR QUEUE [close]
  local dir=$1 lock i f
  exec {lock}>>"$dir/queue.lock"
  flock "$lock"
  if [[ $2 == queue.image && -e $dir/$2.new ]]; then
    cat "$dir/$2.new" >>"$dir/$2"
  elif [[ -e $dir/$2.new ]]; then
    while read -r i; do
      mapfile -t f <"$dir/piece.$i"
      printf '%d %d\n' $((f[3] - f[2])) "$i"
    done <"$dir/$2.new" | sort -k1,1nr -k2,2n | cut -d ' ' -f 2 >>"$dir/$2"
  fi
  rm -f "$dir/$2.new"
  [[ ${3:-} != close ]] || : >"$dir/queue.closed"
  exec {lock}>&-
}

# The next piece for a stream: the image's first, then the folders'; waits while the queues are open but
# empty. Fails once every piece is taken.
take_piece() { # DIR
  local dir=$1 lock queue taken closed
  while :; do
    exec {lock}>>"$dir/queue.lock"
    flock "$lock"
    for queue in queue.image queue.files; do
      [[ -e $dir/$queue ]] || continue
      taken=$(cat "$dir/$queue.taken" 2>/dev/null || echo 0)
      if ((taken < $(wc -l <"$dir/$queue"))); then
        echo $((taken + 1)) >"$dir/$queue.taken"
        exec {lock}>&-
        sed -n "$((taken + 1))p" "$dir/$queue"
        return 0
      fi
    done
    closed=0
    [[ -e $dir/queue.closed ]] && closed=1
    exec {lock}>&-
    ((closed == 0)) || return 1
    sleep 0.2
  done
}

# The bytes of a piece (its file's lines: SRC START OFFSET LENGTH ...) from its offset on; dd counts them
# into COUNTER.
piece_bytes() { # COUNTER SRC START OFFSET LENGTH ...
  LC_ALL=C dd if="$2" bs=1M iflag=skip_bytes,count_bytes skip=$(($3 + $4)) count=$(($5 - $4)) status=progress \
    2>"$1"
}

# One stream from the head: piece after piece as it takes them, a frame each (relay's) to the nodes it
# feeds on the way to the piece's writers, over the routes (ROUTE words as relay reads them). A frame's
# bytes are exactly what its header says: where the file on the head shrank, zeros follow (which the
# checks after the copy then find), so no relay reads bytes as a header. dd counts the bytes sent into
# DIR/bytes.K for the progress.
send_stream() { # DIR STREAM ROOTS ROUTE...
  local dir=$1 stream=$2 opts here=$SPARKC_HEAD tmp roots status=0 children=() pids=() targets=()
  local -A parent=() fd_of=()
  shift 2
  opts=("${SPARKC_SSH_OPTS[@]}" "${SPARKC_COPY_SSH[@]}")
  relay_open "$SPARKC_HEAD" "$stream" "${#opts[@]}" "${opts[@]}" "$@" || return 1
  local i f n sent
  while i=$(take_piece "$dir"); do
    mapfile -t f <"$dir/piece.$i"
    relay_header "${f[2]} ${f[3]} ${f[4]} ${f[5]}" "${f[4]}" || { status=1; break; }
    ((${#targets[@]})) || continue
    n=$((f[3] - f[2]))
    # Each node fed gets its own read of the file (from the page cache): no tee between them.
    local target first=1 readers=()
    for target in "${targets[@]}"; do
      if ((first)); then
        piece_bytes "$dir/bytes.$i" "${f[@]}" >"$target" &
      else
        piece_bytes /dev/null "${f[@]}" >"$target" &
      fi
      readers+=($!)
      first=0
    done
    for target in "${readers[@]}"; do
      wait "$target" || status=1
    done
    ((status == 0)) || break
    sent=$(sent_bytes "$dir/bytes.$i")
    if ((sent < n)); then
      for target in "${targets[@]}"; do
        head -c $((n - sent)) /dev/zero >"$target" || { status=1; break 2; }
      done
    fi
  done
  relay_close || status=1
  return "$status"
}

# Starts SPARKC_STREAMS streams (their process IDs in SPARKC_COPIES), each down the routes to NODES and the
# nodes between them and the head; a stream's errors in DIR/stream.N.err.
SPARKC_COPIES=() # the streams running now (process IDs), which copy_progress watches
start_streams() { # DIR ROOTS NODE...
  local dir=$1 roots=$2 node carrier s words=()
  shift 2
  for carrier in $(for node; do route_path "$node"; done | LC_ALL=C sort -u); do
    words+=("$(route_word "$carrier")")
  done
  SPARKC_COPIES=()
  for ((s = 0; s < SPARKC_STREAMS; s++)); do
    send_stream "$dir" "$s" "$roots" "${words[@]}" 2>"$dir/stream.$s.err" &
    SPARKC_COPIES+=($!)
  done
}

# Queues the pieces of one copy (QUEUE: queue.image or queue.files) for the nodes NEED (those that lack
# it). PLAN: a line a piece, "START LENGTH FILE SUM DEST", its bytes read from the file that FILE indexes
# in SPARKC_PLAN_SRC; DIR/ITEM.held.NODE: what each node holds of each piece, a word a line
# (piece_states' words). A piece of a file a node holds whole (SPARKC_HAS_FILE[NODE|ITEM|FILE]) is not
# wanted there. Each piece is queued with the offset all its writers resume from; adds to
# SPARKC_RESUMED[NODE|ITEM] the bytes a node had and to SPARKC_RECEIVES[NODE|ITEM] what it is sent.
SPARKC_PLAN_SRC=()
declare -A SPARKC_HAS_FILE=() SPARKC_RESUMED=() SPARKC_RECEIVES=()
plan_pieces() { # DIR QUEUE ITEM PLAN NEED...
  local dir=$1 queue=$2 item=$3 plan=$4 node k=0 state start length file dest
  shift 4
  local -A held=()
  for node; do
    SPARKC_RESUMED[$node|$item]=0
    SPARKC_RECEIVES[$node|$item]=0
    local states=()
    mapfile -t states <"$dir/$item.held.$node"
    for k in "${!states[@]}"; do
      held[$node|$k]=${states[k]}
    done
  done
  k=0
  while read -r start length file _ dest; do
    local offset="" writers=()
    for node; do
      state=${held[$node|$k]:-0}
      [[ -z ${SPARKC_HAS_FILE[$node|$item|$file]:-} ]] || continue
      if [[ $state == have ]]; then
        SPARKC_RESUMED[$node|$item]=$((SPARKC_RESUMED[$node|$item] + length))
        continue
      fi
      [[ $state =~ ^[0-9]+$ ]] && ((state <= length)) || state=0
      [[ -n $offset ]] && ((offset <= state)) || offset=$state
      writers+=("$node")
    done
    if ((${#writers[@]})); then
      for node in "${writers[@]}"; do
        SPARKC_RESUMED[$node|$item]=$((SPARKC_RESUMED[$node|$item] + offset))
        SPARKC_RECEIVES[$node|$item]=$((SPARKC_RECEIVES[$node|$item] + length - offset))
      done
      node=${writers[*]}
      queue_piece "$dir" "$queue" "${SPARKC_PLAN_SRC[file]}" "$start" "$offset" "$length" "${node// /,}" "$dest"
    fi
    k=$((k + 1))
  done <"$plan"
}
