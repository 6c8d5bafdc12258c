# -- fabric probe ------------------------------------------------------------------------------
# One short all-reduce across every node, in the deployment's image with its devices and
# environment, before the engine's long load: NCCL says which transport it really used and the
# launcher fails here, in about a minute, where a silent fallback to sockets would otherwise cost
# the whole load and run at about 3 GB/s. One container per node (<container>-probe), removed after.
# The probe's program (runtime/probe.py), run by python3 -c in each rank's container.
# shellcheck disable=SC2016  # Python's text, not the shell's
# sparkc-embed SPARKC_PROBE_PY probe.py
probe_fabric() {
  ((SPARKC_PROBE)) || return 0
  phase probe "one all-reduce across ${#SPARKC_NODES[@]} node(s) in image $SPARKC_IMAGE (at most ${SPARKC_PROBE_TIMEOUT}s)"
  local node dir line transport busbw error nccl state waited=0 probe_failures=() probe_waits=()
  if dry_run; then
    for node in "${SPARKC_NODES[@]}"; do
      probe_argv "$node"
      dry_print "$node" "${SPARKC_ARGV[@]}" -c "<the probe program>" >&3
    done
    phase_done
    return 0
  fi
  if port_in_use 127.0.0.1 "$SPARKC_PROBE_PORT" || port_in_use "$SPARKC_HEAD_FABRIC_IP" "$SPARKC_PROBE_PORT"; then
    fail "$SPARKC_HEAD" "the probe's port $SPARKC_PROBE_PORT (the rendezvous port) is already in use on the head by another program"
  fi
  dir=$(mktemp -d)
  for node in "${SPARKC_NODES[@]}"; do
    on_node "$node" docker rm -f "${SPARKC_CONTAINER[$node]}-probe" >/dev/null 2>&1 || true
    probe_argv "$node"
    on_node "$node" "${SPARKC_ARGV[@]}" -c "$SPARKC_PROBE_PY" >"$dir/$node.start" 2>&1 \
      || { probe_cleanup; fail "$node" "could not start the probe container: $(tail -n 3 "$dir/$node.start")"; }
  done
  # The program stops itself after SPARKC_PROBE_TIMEOUT; the margin covers container start and exit.
  for node in "${SPARKC_NODES[@]}"; do
    until state=$(on_node "$node" docker inspect --format '{{.State.Status}}' "${SPARKC_CONTAINER[$node]}-probe" 2>&1) \
      && [[ $state == exited || $state == dead ]]; do
      if ((waited > SPARKC_PROBE_TIMEOUT + 30)); then
        warn "$node: the probe did not end by itself; removing it"
        break
      fi
      sleep 1
      waited=$((waited + 1))
    done
    on_node "$node" docker logs "${SPARKC_CONTAINER[$node]}-probe" >"$dir/$node.log" 2>&1 || true
  done
  probe_cleanup
  for node in "${SPARKC_NODES[@]}"; do
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
    elif ((SPARKC_HAS_RDMA[$node])) && [[ $transport != IB ]]; then
      probe_failures+=("$node: NCCL used $transport, not RDMA, although the node lists RDMA devices; at about"
        "3 GB/s instead of the fabric's speed. Check NCCL_IB_HCA against ibdev2netdev on every node, that"
        "the containers see /dev/infiniband and that NCCL_IB_DISABLE is 0 ($(grep -m1 -E 'via NET/|Using network' \
          "$dir/$node.log" | sed 's/.*NCCL INFO //'))")
    elif ((SPARKC_SWITCHLESS)) && [[ -n $nccl ]] && version_below "$nccl" "$SPARKC_SUBNET_ROUTING_NCCL"; then
      probe_failures+=("$node: the image $SPARKC_IMAGE has NCCL $nccl, which ignores NCCL_IB_SUBNET_AWARE_ROUTING (read"
        "from NCCL $SPARKC_SUBNET_ROUTING_NCCL on): in a mesh or ring each peer is reached over its own cable only with"
        "it; use an image with NCCL $SPARKC_SUBNET_ROUTING_NCCL or later")
    else
      log "$node: probe transport $transport, bus bandwidth $busbw GB/s${nccl:+, NCCL $nccl}"
    fi
  done
  # A node that failed for a reason of its own comes first: the others only waited for it.
  probe_failures+=("${probe_waits[@]}")
  if ((${#probe_failures[@]})); then
    local first=${probe_failures[0]%%:*}
    # A new folder of its own: the files copied into it cannot meet a link planted there.
    new_folder "$SPARKC_SCRIPT_DIR/logs" "probe-$(date -u +%Y%m%dT%H%M%SZ)" || exit 1
    cp "$dir"/*.log "$SPARKC_NEW_FOLDER/" 2>/dev/null || true
    fail "$first" "the fabric probe failed: ${probe_failures[*]}. Each node's probe output: $SPARKC_NEW_FOLDER/;" \
      "launch-cluster.sh --no-probe (or launch.probe: false) skips the probe"
  fi
  rm -rf "$dir"
  phase_done
}

# SPARKC_ARGV: the probe's `docker run` words for a node (its program follows as python3 -c).
probe_argv() {
  compiled_run SPARKC_PROBE_RUN "$1" SPARKC_ARGV
  # The same weights mount as the engine's: a Hugging Face snapshot named by its commit.
  substitute_snapshot
  node_folders_argv "$1"  # the container's mounts under ~/ (the patch folder's is not among the probe's words)
  with_api_port "${SPARKC_PROBE_API_PORT_AT[$1]}" 0  # the engine's environment, as --port leaves it
  with_extra_env
}

# NCCL reads NCCL_IB_SUBNET_AWARE_ROUTING from this release on (NVIDIA/nccl commit 5c1c4288).
readonly SPARKC_SUBNET_ROUTING_NCCL=2.30.7

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
  for node in "${SPARKC_NODES[@]}"; do
    on_node "$node" docker rm -f "${SPARKC_CONTAINER[$node]}-probe" >/dev/null 2>&1 || true
  done
}
