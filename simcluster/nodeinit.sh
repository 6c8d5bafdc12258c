#!/usr/bin/env bash
# PID 1 of one simulated node. Started by the harness as
#   ip netns exec NODE_NS unshare --pid --fork --mount-proc --uts --ipc -- bash nodeinit.sh
# so it already has its own network, PID, mount, UTS and IPC namespaces. It makes the node look like
# a separate host (hostname, /run, /dev/shm, /etc/hosts, cgroups), starts sshd and dockerd, then stays as the
# reaper. Killing it with SIGKILL takes every process of the node down with it.
#
# Inputs (environment): SIM_NODE_NAME, SIM_NODE_DIR, SIM_CLUSTER_DIR, SIM_CGROUP_MOUNTS (lines of
# "fstype subdir options"), SIM_PYTHON.
set -Eeuo pipefail

hostname "$SIM_NODE_NAME"

# A private /run: sshd's and dockerd's pid files and sockets must not collide between nodes.
mount --bind "$SIM_NODE_DIR/run" /run
mkdir -p /run/sshd /run/lock

# A private /dev/shm, as separate hosts have: vLLM tells ranks on its own host from ranks on another by
# opening a POSIX shared-memory segment another rank made (in_the_same_node_as); one shared /dev/shm made
# every node one host to it, and its cross-node message queues then waited forever on shared memory.
# Containers started with --ipc host get this one.
mount -t tmpfs -o mode=1777,nosuid,nodev shm /dev/shm

# The node's memory as tests set it (hardware.py), where the real one is: the launcher's preflight reads it,
# and the runtime wrapper mounts it over every container's /proc/meminfo too.
mount --bind /run/sparkc-sim/hw/proc/meminfo /proc/meminfo

# `ip netns exec` remounted /sys, which hides /sys/fs/cgroup; dockerd needs the hierarchies back.
mount -t tmpfs -o mode=755 cgroup /sys/fs/cgroup
while read -r fstype subdir options; do
  [[ -n "$fstype" ]] || continue
  mkdir -p "/sys/fs/cgroup/$subdir"
  mount -t "$fstype" -o "$options" "$fstype" "/sys/fs/cgroup/$subdir"
done <<<"$SIM_CGROUP_MOUNTS"

# Name resolution and ssh client defaults of this node (node names -> management IPs; the key).
mount --bind "$SIM_NODE_DIR/hosts" /etc/hosts
mount --bind "$SIM_CLUSTER_DIR/ssh/ssh_config" /etc/ssh/ssh_config
# The node's own ~/.ssh (known_hosts, keys, authorized_keys), as each real host has its own home.
mkdir -p /root/.ssh
mount --bind "$SIM_NODE_DIR/home-ssh" /root/.ssh

# The node's fake nvidia-smi (simcluster/hardware.py), on every PATH.
mount --bind "$SIM_CLUSTER_DIR/node-sbin" /usr/local/sbin

/usr/sbin/sshd -f "$SIM_CLUSTER_DIR/ssh/sshd_config" -E "$SIM_NODE_DIR/sshd.log"

# The fake nvidia-container-runtime-hook must be on dockerd's PATH when it starts, for --gpus; every
# container runs through the runtime wrapper (nodefiles.py), which gives it the node's /proc/meminfo.
PATH="$SIM_CLUSTER_DIR/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
  dockerd --data-root "$SIM_NODE_DIR/docker" --host unix:///run/docker.sock \
  --add-runtime "sparkc-sim=$SIM_CLUSTER_DIR/bin/sparkc-sim-runc" --default-runtime sparkc-sim \
  --pidfile /run/docker.pid >"$SIM_NODE_DIR/dockerd.log" 2>&1 </dev/null &

echo "node $SIM_NODE_NAME: sshd and dockerd started"
touch /run/sparkc-sim-init-done

# Stay as PID 1 and reap orphans (processes left behind by ssh sessions are reparented here).
exec "$SIM_PYTHON" -c '
import os, time
while True:
    try:
        os.wait()
    except ChildProcessError:
        time.sleep(1)
'
