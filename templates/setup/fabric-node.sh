# sparkc setup-fabric, node side: give each fabric netdev its address and MTU, persisted the distribution's
# way (netplan, else NetworkManager), and make the live state match. Plain POSIX sh, sent as the standard
# input of `sh -s -- MTU DRY_RUN NETDEV ADDRESS/PREFIX [NETDEV ADDRESS/PREFIX ...]` over ssh.
# Idempotent: what is already right is left alone and said to be.
set -eu
mtu=$1 dry=$2
shift 2
host=$(hostname 2>/dev/null || echo node)
say() { printf '%s: %s\n' "$host" "$*"; }
if [ "$(id -u)" = 0 ]; then as_root() { "$@"; }; else as_root() { sudo -n "$@"; }; fi
# A change: run it (as root), or with --dry-run only say it.
act() {
  changed=1
  if [ "$dry" = 1 ]; then say "would run: $*"; else say "run: $*"; as_root "$@"; fi
}
# Run FUNCTION NETDEV ADDRESS for each pair, noting the netdevs it changed.
touched=" "
each() {
  fn=$1
  shift
  while [ "$#" -ge 2 ]; do
    changed=0
    "$fn" "$1" "$2"
    [ "$changed" = 0 ] || touched="$touched$1 "
    shift 2
  done
}
missing=0
exists() {
  if [ ! -e "/sys/class/net/$1" ]; then
    say "error: no netdev $1 here (ip -br link lists them); fix cluster.nodes[].fabric.netdev or fabric.addresses"
    missing=1
  fi
}
each exists "$@"
[ "$missing" = 0 ] || exit 1

if command -v netplan >/dev/null 2>&1 && [ -d /etc/netplan ]; then
  manager=netplan
elif command -v nmcli >/dev/null 2>&1; then
  manager=nmcli
else
  manager=none
  say "warning: neither netplan nor nmcli here: the live settings below are lost at the next reboot"
fi

# One netdev: persist its settings (netplan: the file only, applied once for all), then the live state.
written=0
persist() {
  netdev=$1 address=$2
  case $manager in
    netplan)
      file=/etc/netplan/60-sparkc-fabric-$netdev.yaml
      want=$(printf 'network:\n  version: 2\n  ethernets:\n    %s:\n      dhcp4: false\n      addresses: [%s]\n      mtu: %s' \
        "$netdev" "$address" "$mtu")
      have=$(as_root cat "$file" 2>/dev/null || true)
      mode=$(stat -c %a "$file" 2>/dev/null || true)
      if [ "$have" = "$want" ] && [ "$mode" = 600 ]; then
        say "unchanged: $file"
      elif [ "$dry" = 1 ]; then
        changed=1 written=1
        say "would write $file (mode 600)"
      else
        # Mode 600: netplan warns about configuration others can read, and so do we.
        # shellcheck disable=SC2016  # $1 is expanded by the inner sh, on purpose
        printf '%s\n' "$want" | as_root sh -c 'umask 077 && cat >"$1" && chmod 600 "$1"' sh "$file"
        changed=1 written=1
        say "wrote $file (mode 600)"
      fi
      ;;
    nmcli)
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
      ;;
  esac
}

# The live state, whatever persists it (a firmware reboot has been seen to reset the MTU to 1500).
live() {
  netdev=$1 address=$2
  live_mtu=$(cat "/sys/class/net/$netdev/mtu")
  [ "$live_mtu" = "$mtu" ] || act ip link set dev "$netdev" mtu "$mtu"
  if ! ip -4 addr show dev "$netdev" | grep -qF "inet $address "; then
    act ip addr add "$address" dev "$netdev"
  fi
}

report() {
  case $touched in
    *" $1 "*) ;;
    *) say "$1 already has $2 and MTU $mtu: nothing to change" ;;
  esac
}
each persist "$@"
[ "$written" = 0 ] || act netplan apply
each live "$@"
each report "$@"
