# Split planes, node side: joins the preflight's functions (one_line, the a_KEY inputs) when the spec splits them.
# shellcheck disable=SC2154  # a_control, a_data: the preflight's inputs
check_planes() {
  if out=$(ip -o addr show dev "$a_control" 2>&1); then
    printf "%s\n" "$out" | sed "s/^/control_addr /"
  else
    echo "control_error $(printf "%s" "$out" | one_line)"
  fi
  for netdev in $a_data; do
    if out=$(ip -o link show dev "$netdev" 2>&1); then
      printf "%s\n" "$out" | sed "s/^/data_link $netdev /"
    else
      echo "data_error $netdev $(printf "%s" "$out" | one_line)"
    fi
  done
}
