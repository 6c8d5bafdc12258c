# A ring, node side: how this node reaches the node before it round the ring (that node's fabric
# address, at the other end of this node's port 1 cable), and whether it answers there.
# shellcheck disable=SC2154  # a_ring_from: the preflight's input
check_ring() {
  echo "ring_route $(ip -o route get "$a_ring_from" 2>&1 | one_line)"
  if ! command -v ping >/dev/null 2>&1; then
    echo "ring_ping missing"
  elif ping -c 1 -W 2 "$a_ring_from" >/dev/null 2>&1; then
    echo "ring_ping ok"
  else
    echo "ring_ping no"
  fi
}
