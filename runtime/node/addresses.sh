# fabric.addresses, node side: for each "NETDEV IP" pair of $a_addresses, whether the netdev carries the
# address (fabric_address NETDEV IP yes|no, and what it has), or does not exist (fabric_address_error).
check_addresses() {
  # shellcheck disable=SC2086  # NETDEV IP words, split on purpose (interface names and IPv4 addresses)
  set -- ${a_addresses:-}
  while [ "$#" -ge 2 ]; do
    if ! out=$(ip -o addr show dev "$1" 2>&1); then
      echo "fabric_address_error $1 $(printf "%s" "$out" | one_line)"
    elif printf "%s\n" "$out" | grep -qF " inet $2/"; then
      echo "fabric_address $1 $2 yes"
    else
      echo "fabric_address $1 $2 no $(printf "%s\n" "$out" | grep -oE "inet6? [^ ]+" | one_line)"
    fi
    shift 2
  done
}
