# Split planes: the control netdev carries the node's control IP (Gloo, TensorPipe, the rendezvous
# and Ray bind to it), and every data netdev exists and has its link up (NCCL fails at once on a
# missing interface and stalls on one without carrier).
check_planes() {
  local node=$1 addr link netdev
  local control=${CONTROL_NETDEV[$1]} ip=${CONTROL_IP[$1]}
  addr=$(run_on "$node" ip -o addr show dev "$control" 2>&1) \
    || fail "$node" "control interface $control does not exist on $node ($addr): check 'ip -br addr' there" \
      "and set cluster.nodes[].control.netdev"
  if ((DRY_RUN == 0)) && [[ $addr != *" $ip/"* ]]; then
    fail "$node" "$ip is not an address of $control on $node (it has: $(grep -oE 'inet6? [^ ]+' <<<"$addr" \
      | tr '\n' ' ')). Fix cluster.nodes[].control in the spec"
  fi
  for netdev in ${DATA_NETDEVS[$node]}; do
    link=$(run_on "$node" ip -o link show dev "$netdev" 2>&1) \
      || fail "$node" "data interface $netdev does not exist on $node ($link): check 'ip -br link' there and" \
        "set cluster.nodes[].fabric.netdevs"
    ((DRY_RUN)) && continue
    [[ $link =~ \<([^>]*,)?UP(,[^>]*)?\> && $link != *NO-CARRIER* ]] \
      || fail "$node" "data interface $netdev is down on $node ($(grep -oE '<[^>]*>' <<<"$link")): bring it up" \
        "(ip link set $netdev up) and check its cable"
  done
  ((DRY_RUN)) || log "$node: control $ip on $control, data on ${DATA_NETDEVS[$node]}"
}
