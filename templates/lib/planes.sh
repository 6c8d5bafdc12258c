# Split planes, checked in the preflight's one round trip: the control netdev carries the node's
# control IP (Gloo, TensorPipe, the rendezvous and Ray bind to it), and every data netdev exists and
# has its link up (NCCL fails at once on a missing interface and stalls on one without carrier).
# shellcheck disable=SC2016  # the script is expanded by sh on the node, not here
# sparkc-embed PLANES_REMOTE_LIB node/planes.sh

# The checks above join the preflight where the deployment splits its planes (HAS_PLANES).
planes_enable() {
  PREFLIGHT_EXTRA_LIB+=$PLANES_REMOTE_LIB
  PREFLIGHT_CHECKS+=(planes)
  PREFLIGHT_JUDGES+=(planes)
}

planes_preflight_args() { PF_ARGS+=("control=${CONTROL_NETDEV[$1]}" "data=${DATA_NETDEVS[$1]}"); }

judge_planes() {
  local node=$1 control=${CONTROL_NETDEV[$1]} ip=${CONTROL_IP[$1]} addrs netdev rest
  if [[ -n ${PF[$node,control_error]+x} ]]; then
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
  pf_note "$node" planes "control $ip on $control, data on ${DATA_NETDEVS[$node]}"
}
