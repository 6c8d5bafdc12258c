# sparkc setup-fabric, node side: give each fabric netdev its address and MTU, persisted the distribution's
# way (netplan, else NetworkManager), and make the live state match. Plain POSIX sh, sent as the standard
# input of `sh -s -- MTU DRY_RUN NETDEV ADDRESS/PREFIX [NETDEV ADDRESS/PREFIX ...]` over ssh.
# Idempotent: what is already right is left alone and said to be. Each netdev ends with the one address
# given here: netplan concatenates address lists across its files, so a netdev another file defines (NVIDIA's
# 40-cx7.yaml, a hand-made one) is taken out of that file, and any other IPv4 address is removed live.
# Changes run as root: directly when logged in as root, else through `sudo -n` (never a password prompt).
set -eu
mtu=$1 dry=$2
# Where /etc, /run, /lib and /sys are: the root directory on a node; another folder in tests.
root=${SPARKC_SETUP_ROOT:-}
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
  if [ ! -e "$root/sys/class/net/$1" ]; then
    say "error: no netdev $1 here (ip -br link lists them); fix cluster.nodes[].fabric.netdev or fabric.addresses"
    missing=1
  fi
}
each exists "$@"
[ "$missing" = 0 ] || exit 1

if command -v netplan >/dev/null 2>&1 && [ -d "$root/etc/netplan" ]; then
  manager=netplan
elif command -v nmcli >/dev/null 2>&1; then
  manager=nmcli
else
  manager=none
  say "warning: neither netplan nor nmcli here: the live settings below are lost at the next reboot"
fi

# Each netplan file other than FILE that defines NETDEV (a mapping key of that name), one a line.
others_defining() { # NETDEV FILE
  for other in "$root"/lib/netplan/*.yaml "$root"/etc/netplan/*.yaml "$root"/run/netplan/*.yaml; do
    [ -f "$other" ] && [ "$other" != "$2" ] || continue
    if as_root grep -qE "^[[:space:]]+$1:([[:space:]]|\$)" "$other" 2>/dev/null; then printf '%s\n' "$other"; fi
  done
}

# A netplan file without NETDEV's definition (the key's line and every line indented deeper), and without
# an `ethernets:` left empty by that: what the file said about other netdevs stays as it was.
without_netdev() { # NETDEV FILE
  as_root cat "$2" | awk -v key="$1" '
    function indent(line) { match(line, /^ */); return RLENGTH }
    skip && ($0 ~ /^[[:space:]]*(#.*)?$/ || indent($0) > depth) { next }
    { skip = 0 }
    $0 ~ "^ +" key ":([[:space:]]|$)" { skip = 1; depth = indent($0); next }
    { lines[++n] = $0 }
    END {
      for (i = 1; i <= n; i++) {
        if (lines[i] ~ /^ *ethernets: *$/) {
          j = i + 1
          while (j <= n && lines[j] ~ /^[[:space:]]*(#.*)?$/) j++
          if (j > n || indent(lines[j]) <= indent(lines[i])) continue
        }
        print lines[i]
      }
    }'
}

# Take NETDEV out of every other netplan file (a copy of each file as it was is kept beside it, as
# FILE.sparkc-saved, which netplan does not read).
take_out() { # NETDEV FILE
  others=$(others_defining "$1" "$2")
  [ -n "$others" ] || return 0
  saved_ifs=$IFS
  IFS='
'
  for other in $others; do
    changed=1 written=1
    if [ "$dry" = 1 ]; then
      say "would take $1 out of $other (netplan would add its addresses to the fabric address); a copy as $other.sparkc-saved"
      continue
    fi
    kept=$(without_netdev "$1" "$other")
    as_root cp -p "$other" "$other.sparkc-saved"
    # shellcheck disable=SC2016  # $1 is expanded by the inner sh, on purpose
    printf '%s\n' "$kept" | as_root sh -c 'cat >"$1"' sh "$other"
    say "took $1 out of $other (netplan would add its addresses to the fabric address); the file as it was: $other.sparkc-saved"
  done
  IFS=$saved_ifs
}

# One netdev: persist its settings (netplan: the file only, applied once for all), then the live state.
written=0
persist() {
  netdev=$1 address=$2
  case $manager in
    netplan)
      file=$root/etc/netplan/60-sparkc-fabric-$netdev.yaml
      take_out "$netdev" "$file"
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

# The live state, whatever persists it (a firmware reboot has been seen to reset the MTU to 1500): the MTU,
# the address, and no other IPv4 address (NCCL and the RDMA GIDs would see two), but the one this ssh
# session came in on (SSH_CONNECTION's third word), whatever the spec says.
live() {
  netdev=$1 address=$2
  live_mtu=$(cat "$root/sys/class/net/$netdev/mtu")
  [ "$live_mtu" = "$mtu" ] || act ip link set dev "$netdev" mtu "$mtu"
  for old in $(ip -4 -o addr show dev "$netdev" | awk '$3 == "inet" { print $4 }'); do
    if [ "$old" != "$address" ] && [ "${old%/*}" != "$(echo "${SSH_CONNECTION:-}" | cut -d' ' -f3)" ]; then
      act ip addr del "$old" dev "$netdev"
    fi
  done
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
