# -- fabric probe ------------------------------------------------------------------------------
# One short all-reduce across every node, in the deployment's image with its devices and
# environment, before the engine's long load: NCCL says which transport it really used and the
# launcher fails here, in about a minute, where a silent fallback to sockets would otherwise cost
# the whole load and run at about 3 GB/s. One container per node (<container>-probe), removed after.
# The probe's program (templates/lib/probe.py), run by python3 -c in each rank's container.
# shellcheck disable=SC2016  # Python's text, not the shell's
# sparkc-embed PROBE_PY probe.py
probe_fabric() {
  ((PROBE)) || return 0
  phase probe "one all-reduce across ${#NODES[@]} node(s) in image $IMAGE (at most ${PROBE_TIMEOUT}s)"
  local node dir line transport busbw error nccl state waited=0 probe_failures=() probe_waits=()
  if ((DRY_RUN)); then
    for node in "${NODES[@]}"; do
      probe_argv "$node"
      dry_print "$node" "${ARGV[@]}" -c "<the probe program>" >&3
    done
    phase_done
    return 0
  fi
  if port_in_use 127.0.0.1 "$PROBE_PORT" || port_in_use "$HEAD_FABRIC_IP" "$PROBE_PORT"; then
    fail "$HEAD" "the probe's port $PROBE_PORT (the rendezvous port) is already in use on the head by another program"
  fi
  dir=$(mktemp -d)
  for node in "${NODES[@]}"; do
    on_node "$node" docker rm -f "${CONTAINER[$node]}-probe" >/dev/null 2>&1 || true
    probe_argv "$node"
    on_node "$node" "${ARGV[@]}" -c "$PROBE_PY" >"$dir/$node.start" 2>&1 \
      || { probe_cleanup; fail "$node" "could not start the probe container: $(tail -n 3 "$dir/$node.start")"; }
  done
  # The program stops itself after PROBE_TIMEOUT; the margin covers container start and exit.
  for node in "${NODES[@]}"; do
    until state=$(on_node "$node" docker inspect --format '{{.State.Status}}' "${CONTAINER[$node]}-probe" 2>&1) \
      && [[ $state == exited || $state == dead ]]; do
      if ((waited > PROBE_TIMEOUT + 30)); then
        warn "$node: the probe did not end by itself; removing it"
        break
      fi
      sleep 1
      waited=$((waited + 1))
    done
    on_node "$node" docker logs "${CONTAINER[$node]}-probe" >"$dir/$node.log" 2>&1 || true
  done
  probe_cleanup
  for node in "${NODES[@]}"; do
    line=$(grep -m1 '^SPARKC_PROBE ' "$dir/$node.log" || true)
    transport=$(probe_field transport "$line")
    busbw=$(probe_field busbw_gbps "$line")
    error=$(probe_field error "$line")
    nccl=$(probe_field nccl "$line")
    if [[ -z $line ]]; then
      probe_waits+=("$node: no result ($(tail -n 2 "$dir/$node.log" | tr '\n' ' '))")
    elif [[ $error == "no result within"* || $error == DistNetworkError:* ]]; then
      # Timed out, or lost the connection when another rank gave up: a consequence, not the cause.
      probe_waits+=("$node: $error")
    elif [[ -n $error ]]; then
      probe_failures+=("$node: $error")
    elif ((HAS_RDMA[$node])) && [[ $transport != IB ]]; then
      probe_failures+=("$node: NCCL used $transport, not RDMA, although the node lists RDMA devices; at about"
        "3 GB/s instead of the fabric's speed. Check NCCL_IB_HCA against ibdev2netdev on every node, that"
        "the containers see /dev/infiniband and that NCCL_IB_DISABLE is 0 ($(grep -m1 -E 'via NET/|Using network' \
          "$dir/$node.log" | sed 's/.*NCCL INFO //'))")
    elif ((SWITCHLESS)) && [[ -n $nccl ]] && version_below "$nccl" "$SUBNET_ROUTING_NCCL"; then
      probe_failures+=("$node: the image $IMAGE has NCCL $nccl, which ignores NCCL_IB_SUBNET_AWARE_ROUTING (read"
        "from NCCL $SUBNET_ROUTING_NCCL on): in a mesh or ring each peer is reached over its own cable only with"
        "it; use an image with NCCL $SUBNET_ROUTING_NCCL or later")
    else
      log "$node: probe transport $transport, bus bandwidth $busbw GB/s${nccl:+, NCCL $nccl}"
    fi
  done
  # A node that failed for a reason of its own comes first: the others only waited for it.
  probe_failures+=("${probe_waits[@]}")
  if ((${#probe_failures[@]})); then
    local first=${probe_failures[0]%%:*}
    # A new folder of its own: the files copied into it cannot meet a link planted there.
    new_folder "$SCRIPT_DIR/logs" "probe-$(date -u +%Y%m%dT%H%M%SZ)" || exit 1
    cp "$dir"/*.log "$NEW_FOLDER/" 2>/dev/null || true
    fail "$first" "the fabric probe failed: ${probe_failures[*]}. Each node's probe output: $NEW_FOLDER/;" \
      "launch-cluster.sh --no-probe (or launch.probe: false) skips the probe"
  fi
  rm -rf "$dir"
  phase_done
}

# ARGV: the probe's `docker run` words for a node (its program follows as python3 -c).
probe_argv() {
  compiled_run PROBE_RUN "$1" ARGV
  # The same weights mount as the engine's: a Hugging Face snapshot named by its commit.
  substitute_snapshot
  with_api_port "${PROBE_API_PORT_AT[$1]}" 0  # the engine's environment, as --port leaves it
  with_extra_env
}

# NCCL reads NCCL_IB_SUBNET_AWARE_ROUTING from this release on (NVIDIA/nccl commit 5c1c4288).
readonly SUBNET_ROUTING_NCCL=2.30.7

# VERSION below MINIMUM, both dotted numbers (2.27.3 < 2.30.7); a part that is not a number counts as 0.
version_below() {
  local -a have want
  local i a b
  IFS=. read -r -a have <<<"$1"
  IFS=. read -r -a want <<<"$2"
  for i in 0 1 2; do
    a=${have[i]:-0} b=${want[i]:-0}
    [[ $a =~ ^[0-9]{1,9}$ ]] || a=0
    [[ $b =~ ^[0-9]{1,9}$ ]] || b=0
    ((10#$a == 10#$b)) || { ((10#$a < 10#$b)); return; }
  done
  return 1
}

# One field of a SPARKC_PROBE JSON line (strings and numbers; the program writes no nested quotes).
probe_field() {
  local found
  found=$(grep -oE "\"$1\": (\"[^\"]*\"|[0-9.eE+-]+)" <<<"$2" | head -n1) || return 0
  found=${found#*: }
  found=${found#\"}
  printf '%s' "${found%\"}"
}

probe_cleanup() {
  local node
  for node in "${NODES[@]}"; do
    on_node "$node" docker rm -f "${CONTAINER[$node]}-probe" >/dev/null 2>&1 || true
  done
}
