# Preflight, node side (sh -c, one round trip per node): the check_NAME functions print "KEY VALUE" lines.
# Each input arrives as an argument KEY=VALUE and is read as $a_KEY; container_format is set by the first line the launcher sends.
# shellcheck disable=SC2154  # a_KEY: assigned from the arguments by the loop below
for arg; do
  key=${arg%%=*}
  case $key in "" | *[!a-z_]*) continue ;; esac
  eval "a_$key=\${arg#*=}"
done
one_line() { tr "\n" " " | sed "s/ *\$//" | cut -c1-400; }

check_host() { echo "host $(uname -n)"; }

check_docker() {
  if out=$(docker version --format "{{.Server.Version}}" 2>&1); then
    echo "docker_version $out"
  else
    echo "docker_error $(printf "%s" "$out" | one_line)"
    return 0
  fi
  id=$(docker image inspect --format "{{.Id}}" "$a_image" 2>/dev/null) || id=-
  echo "image_id $id"
  # state, deployment label and spec hash, as cleanup asks without a preflight (container_format)
  old=$(docker inspect --format "$container_format" "$a_container" 2>/dev/null) || old=missing
  echo "container $old"
}

check_model() {
  if [ ! -d "$a_model" ]; then
    echo "model_dir no"
    return 0
  fi
  echo "model_dir yes"
  # Sizes of the files and of the files links point to (a Hugging Face snapshot is a folder of links to
  # blobs). A link is never followed into a folder: a link to / is one entry, not the node's whole disk.
  # At most 20000 entries and 10 s; "model_cut" says which bound cut the list.
  (cd "$a_model" 2>/dev/null && {
    timeout 10 find . \( -type f -o -type l \) -exec stat -L -c "%f %s %n" {} + 2>/dev/null
    case $? in 124 | 143) echo sparkc-walk-cut ;; esac # timed out (GNU timeout: 124; busybox: TERM)
  }) | awk '$0 == "sparkc-walk-cut" { print "model_cut time"; exit }
    NR > 20000 { print "model_cut files"; exit }
    $1 ~ /^8[0-9a-f][0-9a-f][0-9a-f]$/ { sub(/^[^ ]+ /, ""); print "model_file " $0 }'
}

# Each of container.mounts' host paths, one a line in $a_mounts: those that do not exist.
check_mounts() {
  printf "%s\n" "${a_mounts:-}" | while IFS= read -r path; do
    # A path under ~/ is in the home of the user this runs as (the ssh user), as the launch puts it in the -v.
    case $path in \~/*) path=$HOME/${path#\~/} ;; esac
    [ -z "$path" ] || [ -e "$path" ] || echo "mount_missing $path"
  done
}

check_fabric() {
  [ -n "$a_netdev" ] || return 0 # one node without a fabric: nothing cabled to check
  if out=$(ip -o addr show dev "$a_netdev" 2>&1); then
    printf "%s\n" "$out" | sed "s/^/netdev_addr /"
    ip -o link show dev "$a_netdev" 2>/dev/null | sed "s/^/netdev_link /"
  else
    echo "netdev_error $(printf "%s" "$out" | one_line)"
  fi
}

# Each listed RDMA device: present, its port ACTIVE, its RoCE v2 GIDs of IPv4 addresses (index, type).
check_hcas() {
  [ -n "$a_hcas" ] || return 0
  # SPARKC_PREFLIGHT_ROOT: where tests keep the fake /sys and /dev of a node; unset on real nodes.
  root=${SPARKC_PREFLIGHT_ROOT:-}
  sys=$root/sys/class/infiniband
  if [ -e "$root/dev/infiniband" ]; then echo "dev_infiniband yes"; else echo "dev_infiniband no"; fi
  # shellcheck disable=SC2012  # RDMA device names: no odd characters
  echo "hca_present $(ls "$sys" 2>/dev/null | one_line)"
  for entry in $a_hcas; do
    hca=${entry%%:*} port=${entry#*:}
    dir=$sys/$hca/ports/$port
    if [ ! -d "$sys/$hca" ]; then
      echo "hca_missing $entry"
      continue
    fi
    state=unknown
    read -r state 2>/dev/null <"$dir/state" || state=unknown
    echo "hca_state $entry $state"
    for gid_file in "$dir"/gids/*; do
      [ -r "$gid_file" ] || continue
      gid=
      read -r gid 2>/dev/null <"$gid_file" || continue
      case $gid in 0000:0000:0000:0000:0000:ffff:*) ;; *) continue ;; esac
      index=${gid_file##*/}
      kind=
      read -r kind 2>/dev/null <"$dir/gid_attrs/types/$index" || continue
      echo "hca_gid $entry $index $gid $kind"
    done
  done
}

check_gpus() {
  if ! command -v nvidia-smi >/dev/null 2>&1; then
    echo "gpu_tool missing"
    return 0
  fi
  if out=$(nvidia-smi --query-gpu=index,name --format=csv,noheader 2>&1); then
    printf "%s\n" "$out" | sed "/^$/d; s/^/gpu /"
    nvidia-smi --query-compute-apps=pid,process_name --format=csv,noheader 2>/dev/null | sed "/^$/d; s/^/gpu_process /"
    # Whose each process is: its cgroups name the container it runs in (docker-ID.scope, /docker/ID).
    nvidia-smi --query-compute-apps=pid --format=csv,noheader 2>/dev/null | while read -r pid; do
      case $pid in "" | *[!0-9]*) continue ;; esac
      cgroup=${SPARKC_PREFLIGHT_ROOT:-}/proc/$pid/cgroup
      [ -r "$cgroup" ] || cgroup=/proc/$pid/cgroup
      echo "gpu_cgroup $pid $(one_line <"$cgroup" 2>/dev/null)"
    done
  else
    echo "gpu_error $(printf "%s" "$out" | one_line)"
  fi
}

# MemFree and Cached too: on GB10 CUDA's free memory follows MemFree (page cache counts as used).
check_memory() {
  meminfo=${SPARKC_PREFLIGHT_ROOT:-}/proc/meminfo
  [ -r "$meminfo" ] || meminfo=/proc/meminfo
  awk '$1 == "MemTotal:" || $1 == "MemAvailable:" || $1 == "MemFree:" || $1 == "Cached:" { print "memory", $1, $2 }' \
    "$meminfo"
}

# Every container of a sparkc deployment on this node: ID, state, deployment, name, and what its labels say it
# takes here (memory budget in bytes, API port, other fixed ports; "-" where a label is absent).
check_sparkc() {
  docker ps -a --no-trunc --filter label=sparkc.deployment --format \
    '{{.ID}} {{.State}} {{.Label "sparkc.deployment"}} {{.Names}} {{or (.Label "sparkc.memory-budget") "-"}} {{or (.Label "sparkc.api-port") "-"}} {{or (.Label "sparkc.ports") "-"}} {{or (.Label "sparkc.endpoint-host") "-"}}' \
    2>/dev/null | sed "s/^/sparkc_container /"
}
