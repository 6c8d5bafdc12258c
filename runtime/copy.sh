# Copies along the routes deployment.sh compiles (SPARKC_COPY_FROM, SPARKC_COPY_VIA): what is copied is cut
# into pieces (byte ranges of the image's archive or of a weights file), and each piece goes down the tree of
# routes as one stream, every node writing it while passing it on to the nodes it feeds. So a node two cables
# from the head receives at the pace of its neighbour, and the control network carries no copy where a cable
# path exists. Several streams run at once (--streams), each over one of its route's ways (a cable's twins),
# because one ssh stream rarely fills a link: its cipher runs on one core. A node keeps a piece's bytes in
# PIECE.partial and renames it to PIECE once whole, so an interrupted copy resumes where the pieces end.

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
# The pieces of one copy, by index: where the bytes come from on the head (file, first byte, length) and
# where each node keeps them (@NODE@ stands for the node's name).
SPARKC_PIECE_SRC=()
SPARKC_PIECE_START=()
SPARKC_PIECE_LEN=()
SPARKC_PIECE_DEST=()
SPARKC_PIECE_FILE=()       # the weights file a piece belongs to (its index), empty for the image's
declare -A SPARKC_HAS_FILE=() # NODE|FILE-INDEX: set where the node holds that file whole already

# One node's part of a stream (also the head's, which writes nothing): the bytes on stdin, from OFFSET of the
# piece on, go to the end of DEST.partial here (truncated to OFFSET first; renamed DEST once LENGTH bytes
# long) and on to each node this one feeds. Its own text arrives as $0 on the nodes (bash -c TEXT TEXT ARGS),
# so each hop hands the program on. ROUTE: NODE|FROM|WAYS|KEY-NAME|WRITE|KNOWN, WAYS the user@address list
# (comma-separated) the stream picks from by its number, KEY-NAME the node's HostKeyAlias, WRITE 1 where the
# node lacks the piece (0: it only passes it on), KNOWN (base64) the head's known_hosts lines for KEY-NAME
# where another node than the head sends to it.
relay() { # HERE DEST OFFSET LENGTH STREAM COUNT OPTS... ROUTE...
  local here=$1 template=$2 offset=$3 length=$4 stream=$5 count=$6
  shift 6
  local opts=("${@:1:count}")
  shift "$count"
  local program=${SPARKC_RELAY_PROGRAM:-$0} route node from ways key write known mine=0 dest="" tmp ways_list
  local fifos=() pids=() status=0 pid
  tmp=$(mktemp -d) || return 1
  for route; do
    IFS='|' read -r node from ways key write known <<<"$route"
    [[ $node == "$here" ]] && mine=$write
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
      "$(sh_quote bash -c "$program" "$program" "$node" "$template" "$offset" "$length" "$stream" "$count" \
        "${opts[@]}" "$@")" <"$tmp/$node" &
    pids+=($!)
    fifos+=("$tmp/$node")
  done
  if ((mine)); then
    dest=${template//@NODE@/$here}
    mkdir -p -- "${dest%/*}" && truncate -s "$offset" -- "$dest.partial" || status=1
  fi
  if ((mine && status == 0)); then
    tee -a -- "$dest.partial" "${fifos[@]}" >/dev/null || status=1
  else
    tee -- "${fifos[@]}" >/dev/null || status=1
  fi
  for pid in "${pids[@]}"; do
    wait "$pid" || status=1
  done
  rm -rf "$tmp"
  if ((mine && status == 0)); then
    [[ $(stat -c %s -- "$dest.partial") == "$length" ]] && mv -f -- "$dest.partial" "$dest" || status=1
  fi
  return "$status"
}
SPARKC_RELAY_PROGRAM="$(declare -f sh_quote relay)
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
SPARKC_STATES_PROGRAM="$(declare -f file_sum piece_states)
piece_states \"\$@\""
readonly SPARKC_STATES_PROGRAM

# What NODE holds of the lines LENGTH SUM PATH in FILE (paths with @NODE@ for the node's name), one word a
# line as piece_states writes them, into the array SPARKC_STATES.
SPARKC_STATES=()
SPARKC_STATES_ERROR=""
# SPARKC_STATES_ERROR: why it could not, with the fix where ssh refused a host key.
node_states() { # NODE FILE
  local lines err status=0
  err=$(mktemp) || return 1
  lines=$(sed "s/@NODE@/$1/g" "$2" | on_node "$1" bash -c "$SPARKC_STATES_PROGRAM" sparkc-states "$SPARKC_VERIFY" \
    2>"$err") || status=$?
  SPARKC_STATES_ERROR="$(head -c 300 "$err" | tr '\r\n' '  ')$(key_hint "$1" "$err")"
  rm -f "$err"
  ((status == 0)) || return 1
  mapfile -t SPARKC_STATES <<<"$lines"
}

# The route to NODE as relay reads it (WRITE 1 or 0).
route_word() { # NODE WRITE
  local ways=${SPARKC_ROUTE_VIA[$1]}
  printf '%s|%s|%s|%s|%s|%s' "$1" "${SPARKC_ROUTE_FROM[$1]}" "${ways// /,}" "${SPARKC_KEY_NAME[$1]}" "$2" \
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

# Sends the pieces with the offsets and routes given (SPARKC_SEND_OFFSET, SPARKC_SEND_ROUTES: newline-separated
# route words, both by piece), over SPARKC_STREAMS streams at once, each piece to the least loaded stream,
# largest first. Progress and errors under DIR (bytes.PIECE, stream.N.err). Fails when a stream did.
declare -A SPARKC_SEND_OFFSET=() SPARKC_SEND_ROUTES=()
send_pieces() { # DIR WHAT TOTAL LABEL
  local dir=$1 what=$2 total=$3 label=$4 i s n=$SPARKC_STREAMS order load=() lists=() status=0
  for ((s = 0; s < n; s++)); do
    load[s]=0
    lists[s]=""
  done
  order=$(for i in "${!SPARKC_SEND_ROUTES[@]}"; do
    printf '%d %d\n' $((SPARKC_PIECE_LEN[i] - SPARKC_SEND_OFFSET[$i])) "$i"
  done | sort -k1,1nr -k2,2n | cut -d ' ' -f 2)
  for i in $order; do
    local least=0
    for ((s = 1; s < n; s++)); do
      ((load[s] < load[least])) && least=$s
    done
    load[least]=$((load[least] + SPARKC_PIECE_LEN[i] - SPARKC_SEND_OFFSET[$i]))
    lists[least]+=" $i"
  done
  SPARKC_COPIES=()
  for ((s = 0; s < n; s++)); do
    [[ -n ${lists[s]} ]] || continue
    # shellcheck disable=SC2086  # a list of numbers
    send_stream "$dir" "$s" ${lists[s]} 2>"$dir/stream.$s.err" &
    SPARKC_COPIES+=($!)
  done
  copy_progress "$what" "$total" "$label" "$dir" &
  local watcher=$!
  for i in "${SPARKC_COPIES[@]}"; do
    wait "$i" || status=1
  done
  wait "$watcher" || true
  return "$status"
}

# One stream: its pieces one after the other, each read from the head's file and relayed down its routes.
send_stream() { # DIR STREAM PIECE...
  local dir=$1 stream=$2 i off status=0 routes opts
  shift 2
  opts=("${SPARKC_SSH_OPTS[@]}" "${SPARKC_COPY_SSH[@]}")
  for i; do
    off=${SPARKC_SEND_OFFSET[$i]}
    mapfile -t routes <<<"${SPARKC_SEND_ROUTES[$i]}"
    LC_ALL=C dd if="${SPARKC_PIECE_SRC[i]}" bs=1M iflag=skip_bytes,count_bytes \
      skip=$((SPARKC_PIECE_START[i] + off)) count=$((SPARKC_PIECE_LEN[i] - off)) status=progress 2>"$dir/bytes.$i" \
      | relay "$SPARKC_HEAD" "${SPARKC_PIECE_DEST[i]}" "$off" "${SPARKC_PIECE_LEN[i]}" "$stream" "${#opts[@]}" \
        "${opts[@]}" "${routes[@]}" || status=1
  done
  return "$status"
}

# Plans the pieces of one copy for the nodes NEED (those that lack it): reads what each node of their routes
# holds of the lines in FILE (piece_states' input, one line a piece, in piece order) and sets, by piece, the
# offset all its writers resume from and its routes; SPARKC_RESUMED[NODE] the bytes a node already had.
declare -A SPARKC_RESUMED=() SPARKC_RECEIVES=()
plan_pieces() { # FILE NEED...
  local file=$1 node i words state
  shift
  declare -A want=() held=()
  for node; do
    want[$node]=1
    SPARKC_RESUMED[$node]=0
    SPARKC_RECEIVES[$node]=0
  done
  for node in "${SPARKC_NODES[@]:1}"; do
    [[ -n ${want[$node]:-} ]] || continue
    node_states "$node" "$file" || { warn "$node: cannot read what it holds already: $SPARKC_STATES_ERROR"; return 1; }
    held[$node]=$(printf '%s\n' "${SPARKC_STATES[@]}")
  done
  SPARKC_SEND_OFFSET=()
  SPARKC_SEND_ROUTES=()
  for i in "${!SPARKC_PIECE_LEN[@]}"; do
    local offset="" writers=() lines="" carriers
    for node; do
      state=$(sed -n "$((i + 1))p" <<<"${held[$node]}")
      # A piece of a file the node holds whole already is not wanted there.
      [[ -n ${SPARKC_PIECE_FILE[i]:-} && -n ${SPARKC_HAS_FILE[$node|${SPARKC_PIECE_FILE[i]}]:-} ]] && continue
      if [[ $state == have ]]; then
        SPARKC_RESUMED[$node]=$((SPARKC_RESUMED[$node] + SPARKC_PIECE_LEN[i]))
        continue
      fi
      [[ $state =~ ^[0-9]+$ ]] && ((state <= SPARKC_PIECE_LEN[i])) || state=0
      [[ -n $offset ]] && ((offset <= state)) || offset=$state
      writers+=("$node")
    done
    ((${#writers[@]})) || continue
    SPARKC_SEND_OFFSET[$i]=$offset
    for node in "${writers[@]}"; do
      SPARKC_RESUMED[$node]=$((SPARKC_RESUMED[$node] + offset))
      SPARKC_RECEIVES[$node]=$((SPARKC_RECEIVES[$node] + SPARKC_PIECE_LEN[i] - offset))
    done
    # Every node on a writer's path carries the piece; those that do not write it pass it on only.
    carriers=" $(for node in "${writers[@]}"; do route_path "$node"; done | tr '\n' ' ')"
    for node in "${SPARKC_NODES[@]:1}"; do
      [[ $carriers == *" $node "* ]] || continue
      if [[ " ${writers[*]} " == *" $node "* ]]; then words=1; else words=0; fi
      lines+=$(route_word "$node" "$words")$'\n'
    done
    SPARKC_SEND_ROUTES[$i]=${lines%$'\n'}
  done
}
