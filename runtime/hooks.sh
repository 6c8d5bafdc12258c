# container.hooks: the patch folder reaches every node before its container starts (the head's copy
# is the one beside this script; each worker gets a fresh copy under its user's
# ~/.cache/sparkc/<deployment>/ at every launch), and a hook that failed is named by the launch.
declare -A SPARKC_PATCHES_AT=()

stage_patches() {
  ((SPARKC_HAS_PATCHES)) || return 0
  local node home dir=".cache/sparkc/$SPARKC_DEPLOYMENT"
  [[ -d $SPARKC_SCRIPT_DIR/$SPARKC_PATCHES_DIR ]] \
    || fail "$SPARKC_HEAD" "the patch folder $SPARKC_PATCHES_DIR is missing beside this script: copy the whole compiled folder"
  for node in "${SPARKC_NODES[@]}"; do
    if is_local "$node"; then
      SPARKC_PATCHES_AT[$node]=$SPARKC_SCRIPT_DIR/$SPARKC_PATCHES_DIR
      continue
    fi
    if dry_run; then
      printf '[%s] %s\n' "$node" "tar -C $SPARKC_SCRIPT_DIR -cf - $SPARKC_PATCHES_DIR | (cd && rm -rf $dir/$SPARKC_PATCHES_DIR && mkdir -p $dir && tar -C $dir -xf -)" >&3
      SPARKC_PATCHES_AT[$node]="<home>/$dir/$SPARKC_PATCHES_DIR"
      continue
    fi
    SPARKC_FAILED_NODE=$node
    home=$(tar -C "$SPARKC_SCRIPT_DIR" -cf - "$SPARKC_PATCHES_DIR" | ssh_node "$node" -- \
      "cd && rm -rf $(sh_quote "$dir/$SPARKC_PATCHES_DIR") && mkdir -p $(sh_quote "$dir") && tar -C $(sh_quote "$dir") -xf - && pwd" \
      2>&1) || fail "$node" "could not copy the patch folder to $node: $home"
    SPARKC_PATCHES_AT[$node]=$home/$dir/$SPARKC_PATCHES_DIR
    log "$node: patch folder copied to ${SPARKC_PATCHES_AT[$node]}"
  done
  SPARKC_FAILED_NODE=""
}

# SPARKC_ARGV (a node's docker run): the patch folder's mount names that node's copy.
patches_argv() {
  local i
  for i in "${!SPARKC_ARGV[@]}"; do
    if [[ $i -gt 0 && ${SPARKC_ARGV[i - 1]} == -v && ${SPARKC_ARGV[i]} == "$SPARKC_PATCHES_PLACEHOLDER:"* ]]; then
      SPARKC_ARGV[i]=${SPARKC_PATCHES_AT[$1]}${SPARKC_ARGV[i]#"$SPARKC_PATCHES_PLACEHOLDER"}
    fi
  done
}

# The hook that stopped a node's container, as its runner wrote it into the container's log.
hook_failure() {
  local line
  line=$(on_node "$1" docker logs --tail 50 "${SPARKC_CONTAINER[$1]}" 2>&1 | grep -m1 'sparkc: hook pre_engine\[[0-9]*\] failed') \
    || return 0
  printf '; %s' "${line#*sparkc: }"
}

# cluster.hooks.pre_launch: each command by sh -c on every node's host (head first), before any container
# starts; as the ssh user, or as root through sudo -n. The first that fails stops the launch, naming the
# node and the command. The command crosses ssh as one POSIX single-quoted word (on_node), so every
# login shell hands it to sh exactly as the spec wrote it.
run_host_hooks() {
  ((${#SPARKC_HOST_HOOKS[@]})) || return 0
  phase hooks "run cluster.hooks.pre_launch on every node's host (${#SPARKC_HOST_HOOKS[@]} command(s))"
  local node i
  for node in "${SPARKC_NODES[@]}"; do
    for i in "${!SPARKC_HOST_HOOKS[@]}"; do
      host_hook "$node" "$i"
    done
  done
  phase_done
}

host_hook() {
  local node=$1 i=$2 out status=0 runner=()
  ((SPARKC_HOST_HOOKS_SUDO)) && runner=(sudo -n)
  SPARKC_FAILED_NODE=$node
  out=$(sparkc_run "$node" "${runner[@]}" sh -c "${SPARKC_HOST_HOOKS[i]}" 2>&1 </dev/null) || status=$?
  if ((status)); then
    out=$(printf '%s\n' "$out" | tail -n 5)
    fail "$node" "host hook pre_launch[$i] failed on $node with status $status: ${SPARKC_HOST_HOOKS[i]}${out:+ (it said: $out)}"
  fi
  dry_run || log "$node: host hook pre_launch[$i] done"
  SPARKC_FAILED_NODE=""
}
