# Split planes, checked in the preflight's one round trip: the control netdev carries the node's
# control IP (Gloo, TensorPipe, the rendezvous and Ray bind to it), and every data netdev exists and
# has its link up (NCCL fails at once on a missing interface and stalls on one without carrier).
# shellcheck disable=SC2016  # the script is expanded by sh on the node, not here
# sparkc-embed SPARKC_PLANES_REMOTE_LIB node/planes.sh

# The checks above join the preflight where the deployment splits its planes (SPARKC_HAS_PLANES).
planes_enable() {
  SPARKC_PREFLIGHT_EXTRA_LIB+=$SPARKC_PLANES_REMOTE_LIB
  SPARKC_PREFLIGHT_CHECKS+=(planes)
  SPARKC_PREFLIGHT_JUDGES+=(planes)
}

planes_preflight_args() { SPARKC_PF_ARGS+=("control=${SPARKC_CONTROL_NETDEV[$1]}" "data=${SPARKC_DATA_NETDEVS[$1]}"); }

judge_planes() {
  local node=$1 control=${SPARKC_CONTROL_NETDEV[$1]} ip=${SPARKC_CONTROL_IP[$1]} addrs netdev rest
  if [[ -n ${SPARKC_PF[$node,control_error]+x} ]]; then
    pf_problem "$node" "control interface $control does not exist on $node ($(pf_first "$node" control_error)):" \
      "check 'ip -br addr' there and set cluster.nodes[].control.netdev"
  else
    addrs=$(pf "$node" control_addr)
    if [[ $addrs != *" $ip/"* ]]; then
      pf_problem "$node" "$ip is not an address of $control on $node (it has: $(grep -oE 'inet6? [^ ]+' <<<"$addrs" \
        | tr '\n' ' ')). Fix cluster.nodes[].control in the spec"
    fi
  fi
  while read -r netdev rest; do
    [[ -n $netdev ]] || continue
    pf_problem "$node" "data interface $netdev does not exist on $node ($rest): check 'ip -br link' there and" \
      "set cluster.nodes[].fabric.netdevs"
  done <<<"$(pf "$node" data_error)"
  while read -r netdev rest; do
    [[ -n $netdev ]] || continue
    [[ $rest =~ \<([^>]*,)?UP(,[^>]*)?\> && $rest != *NO-CARRIER* ]] \
      || pf_problem "$node" "data interface $netdev is down on $node ($(grep -oE '<[^>]*>' <<<"$rest")): bring it" \
        "up (ip link set $netdev up) and check its cable"
  done <<<"$(pf "$node" data_link)"
  pf_note "$node" planes "control $ip on $control, data on ${SPARKC_DATA_NETDEVS[$node]}"
}

# fabric.addresses (the twins, the other cable's port): each netdev carries its address, which NCCL's
# RDMA needs (a RoCE v2 IPv4 GID on every device NCCL_IB_HCA lists). setup-fabric.sh sets them.
# shellcheck disable=SC2016  # the script is expanded by sh on the node, not here
# sparkc-embed SPARKC_ADDRESSES_REMOTE_LIB node/addresses.sh

addresses_enable() {
  SPARKC_PREFLIGHT_EXTRA_LIB+=$SPARKC_ADDRESSES_REMOTE_LIB
  SPARKC_PREFLIGHT_CHECKS+=(addresses)
  SPARKC_PREFLIGHT_JUDGES+=(addresses)
}

addresses_preflight_args() { SPARKC_PF_ARGS+=("addresses=${SPARKC_FABRIC_ADDRESSES[$1]}"); }

judge_addresses() {
  local node=$1 netdev ip state rest
  while read -r netdev rest; do
    [[ -n $netdev ]] || continue
    pf_problem "$node" "network interface $netdev (cluster.nodes[].fabric.addresses) does not exist on $node" \
      "($rest): check 'ip -br link' there and fix fabric.addresses"
  done <<<"$(pf "$node" fabric_address_error)"
  while read -r netdev ip state rest; do
    [[ -n $netdev && $state != yes ]] || continue
    pf_problem "$node" "$ip (cluster.nodes[].fabric.addresses) is not an address of $netdev on $node (it has:" \
      "${rest:-no address}): run setup-fabric.sh (sparkc setup-fabric SPEC -o DIR writes it), then launch again"
  done <<<"$(pf "$node" fabric_address)"
}

# A ring: the node list is the cabling's order (each node's port 0 to the next one's port 1), and the
# ranks go round it, so each node must reach the node before it over one of its own cables. A node
# listed out of order reaches it another way (the control network) or not at all: NCCL's ring would
# then run between nodes that no cable joins.
# shellcheck disable=SC2016  # the script is expanded by sh on the node, not here
# sparkc-embed SPARKC_RING_REMOTE_LIB node/ring.sh

ring_enable() {
  SPARKC_PREFLIGHT_EXTRA_LIB+=$SPARKC_RING_REMOTE_LIB
  SPARKC_PREFLIGHT_CHECKS+=(ring)
  SPARKC_PREFLIGHT_JUDGES+=(ring)
}

# The node before NODE round the ring (SPARKC_NODES is in rank order, which goes round it).
ring_from() {
  local i count=${#SPARKC_NODES[@]}
  for i in "${!SPARKC_NODES[@]}"; do
    if [[ ${SPARKC_NODES[i]} == "$1" ]]; then
      printf '%s' "${SPARKC_NODES[(i + count - 1) % count]}"
      return 0
    fi
  done
}

ring_preflight_args() { SPARKC_PF_ARGS+=("ring_from=${SPARKC_FABRIC_IP[$(ring_from "$1")]}"); }

judge_ring() {
  local node=$1 from route dev
  from=$(ring_from "$node")
  route=$(pf_first "$node" ring_route)
  dev=$(grep -oE ' dev [^ ]+' <<<" $route" | head -n 1 || true)
  dev=${dev# dev }
  if [[ -z $dev || " ${SPARKC_DATA_NETDEVS[$node]} " != *" $dev "* ]]; then
    pf_problem "$node" "$node reaches $from, the node before it round the ring, at ${SPARKC_FABRIC_IP[$from]} through" \
      "${dev:-no route} (${route:-no answer}), not one of its cables (${SPARKC_DATA_NETDEVS[$node]}): in a ring each node's" \
      "port 0 is cabled to the next node's port 1, and cluster.nodes lists the nodes in that order; fix the" \
      "order in the spec or the cabling"
  elif [[ $(pf_first "$node" ring_ping) == no ]]; then
    pf_problem "$node" "$node does not reach $from at ${SPARKC_FABRIC_IP[$from]} over $dev: check the cable between" \
      "them and $from's fabric address"
  elif [[ $(pf_first "$node" ring_ping) == missing ]]; then
    pf_warn "$node" "no ping on $node: the cable from $from was checked by its route ($dev) only"
  fi
}
