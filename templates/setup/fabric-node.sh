# sparkc setup-fabric, node side: give one netdev its fabric address and MTU, persisted the
# distribution's way (netplan, else NetworkManager), and make the live state match. Plain POSIX sh,
# sent as the standard input of `sh -s -- NETDEV ADDRESS/PREFIX MTU DRY_RUN` over ssh.
# Idempotent: what is already right is left alone and said to be.
set -eu
netdev=$1 address=$2 mtu=$3 dry=$4
host=$(hostname 2>/dev/null || echo node)
changed=0
say() { printf '%s: %s\n' "$host" "$*"; }
if [ "$(id -u)" = 0 ]; then as_root() { "$@"; }; else as_root() { sudo -n "$@"; }; fi
# A change: run it (as root), or with --dry-run only say it.
act() {
  changed=1
  if [ "$dry" = 1 ]; then say "would run: $*"; else say "run: $*"; as_root "$@"; fi
}
if [ ! -e "/sys/class/net/$netdev" ]; then
  say "error: no netdev $netdev here (ip -br link lists them); fix cluster.nodes[].fabric.netdev"
  exit 1
fi

if command -v netplan >/dev/null 2>&1 && [ -d /etc/netplan ]; then
  file=/etc/netplan/60-sparkc-fabric-$netdev.yaml
  want=$(printf 'network:\n  version: 2\n  ethernets:\n    %s:\n      dhcp4: false\n      addresses: [%s]\n      mtu: %s' \
    "$netdev" "$address" "$mtu")
  have=$(as_root cat "$file" 2>/dev/null || true)
  mode=$(stat -c %a "$file" 2>/dev/null || true)
  if [ "$have" = "$want" ] && [ "$mode" = 600 ]; then
    say "unchanged: $file"
  elif [ "$dry" = 1 ]; then
    changed=1
    say "would write $file (mode 600) and run: netplan apply"
  else
    # Mode 600: netplan warns about configuration others can read, and so do we.
    # shellcheck disable=SC2016  # $1 is expanded by the inner sh, on purpose
    printf '%s\n' "$want" | as_root sh -c 'umask 077 && cat >"$1" && chmod 600 "$1"' sh "$file"
    say "wrote $file (mode 600)"
    act netplan apply
  fi
elif command -v nmcli >/dev/null 2>&1; then
  con=sparkc-fabric-$netdev
  have=$(nmcli -g ipv4.addresses,802-3-ethernet.mtu connection show "$con" 2>/dev/null | tr '\n' ' ' || true)
  if [ "$have" = "$address $mtu " ]; then
    say "unchanged: NetworkManager connection $con"
  else
    if nmcli connection show "$con" >/dev/null 2>&1; then
      act nmcli connection modify "$con" ipv4.method manual ipv4.addresses "$address" 802-3-ethernet.mtu "$mtu"
    else
      act nmcli connection add type ethernet ifname "$netdev" con-name "$con" ipv4.method manual \
        ipv4.addresses "$address" 802-3-ethernet.mtu "$mtu"
    fi
    act nmcli connection up "$con"
  fi
else
  say "warning: neither netplan nor nmcli here: the live settings below are lost at the next reboot"
fi

# The live state, whatever persists it (a firmware reboot has been seen to reset the MTU to 1500).
live_mtu=$(cat "/sys/class/net/$netdev/mtu")
[ "$live_mtu" = "$mtu" ] || act ip link set dev "$netdev" mtu "$mtu"
if ! ip -4 addr show dev "$netdev" | grep -qF "inet $address "; then
  act ip addr add "$address" dev "$netdev"
fi
if [ "$changed" = 0 ]; then say "$netdev already has $address and MTU $mtu: nothing to change"; fi
