# sparkc discover: what one node says about its ConnectX-7 fabric, GPUs and name. Read-only.
# Sent as the standard input of `sh -s` over ssh, so it is plain POSIX sh (bash, dash, busybox sh)
# and reads files with the shell's own `read` where it can (a GID table has hundreds of entries).
# Prints one fact per line, "KIND VALUE...", for sparkc to parse; anything missing is simply absent.

say() { printf '%s\n' "$*"; }

if IFS= read -r name </proc/sys/kernel/hostname 2>/dev/null; then say "hostname $name"
else say "hostname $(hostname 2>/dev/null)"; fi
if [ -r /etc/os-release ]; then
  while IFS= read -r line; do
    case $line in ID=*|ID_LIKE=*|VERSION_ID=*) say "os $line" ;; esac
  done </etc/os-release
fi
for tool in netplan nmcli ibdev2netdev nvidia-smi ip; do
  command -v "$tool" >/dev/null 2>&1 && say "tool $tool"
done

# RDMA devices and the netdevs behind them: sysfs first, ibdev2netdev where sysfs has no link.
for hca in /sys/class/infiniband/*; do
  [ -d "$hca" ] || continue
  ib=${hca##*/}
  found=0
  for net in "$hca"/device/net/*; do
    [ -e "$net" ] || continue
    say "rdma $ib ${net##*/}"
    found=1
  done
  [ "$found" = 1 ] || say "rdma-nonet $ib"
  for gid in "$hca"/ports/1/gids/*; do
    [ -r "$gid" ] || continue
    index=${gid##*/}
    IFS= read -r value <"$gid" 2>/dev/null || continue
    case $value in 0000:0000:0000:0000:0000:0000:0000:0000|'') continue ;; esac
    kind=
    IFS= read -r kind <"$hca/ports/1/gid_attrs/types/$index" 2>/dev/null
    say "gid $ib $index $value $kind"
  done
done
if command -v ibdev2netdev >/dev/null 2>&1; then
  ibdev2netdev 2>/dev/null | while IFS= read -r line; do say "ibdev2netdev $line"; done
fi

# Every netdev's MTU, state and IPv4 addresses: sparkc keeps those with an RDMA device behind them.
for dev in /sys/class/net/*; do
  [ -e "$dev" ] || continue
  nd=${dev##*/}
  mtu='?'
  state='?'
  IFS= read -r mtu <"$dev/mtu" 2>/dev/null
  IFS= read -r state <"$dev/operstate" 2>/dev/null
  say "netdev $nd $mtu $state"
  if command -v ip >/dev/null 2>&1; then
    ip -4 addr show dev "$nd" 2>/dev/null | while read -r word address rest; do
      [ "$word" = inet ] && say "inet $nd $address"
    done
  fi
done

if command -v nvidia-smi >/dev/null 2>&1; then
  if out=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>&1); then
    printf '%s\n' "$out" | while IFS= read -r gpu; do [ -n "$gpu" ] && say "gpu $gpu"; done
  else
    say "gpu-error $(printf '%s' "$out" | head -n 1)"
  fi
fi
say "end"
