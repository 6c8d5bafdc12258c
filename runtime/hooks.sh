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
    record_home "$node" "$home"
    SPARKC_PATCHES_AT[$node]=$home/$dir/$SPARKC_PATCHES_DIR
    log "$node: patch folder copied to ${SPARKC_PATCHES_AT[$node]}"
  done
  SPARKC_FAILED_NODE=""
}

# container.mounts under ~/: each node's home, its ssh user's (the head's: the user running this script), as
# `cd && pwd` answers there; asked once per launch (stage_patches' copy answers it too), within
# SPARKC_HOME_ASK_SECONDS, and checked before any docker run names it.
declare -A SPARKC_HOME_AT=()
readonly SPARKC_HOME_ASK_SECONDS=20

ask_homes() {
  [[ -n $SPARKC_HOME_PLACEHOLDER ]] || return 0
  local node
  for node in "${SPARKC_NODES[@]}"; do
    node_home "$node"
  done
}

# SPARKC_HOME_AT[NODE] set, unless it is already: asked, or named in a dry run.
node_home() {
  [[ -z ${SPARKC_HOME_AT[$1]+x} ]] || return 0
  if dry_run; then
    SPARKC_HOME_AT[$1]="<home of the ssh user on $1>"
  else
    ask_home "$1"
  fi
}

ask_home() {
  local node=$1 answer status=0
  SPARKC_FAILED_NODE=$node
  if is_local "$node"; then
    answer=$(cd 2>&1 && pwd) || status=$?
  else
    answer=$(timeout "$SPARKC_HOME_ASK_SECONDS" ssh "${SPARKC_SSH_OPTS[@]}" "${SPARKC_SSH_MUX[@]}" \
      "${SPARKC_TARGET[$node]}" -- 'cd && pwd' 2>&1 </dev/null) || status=$?
  fi
  if ((status == 124)); then
    fail "$node" "$node did not say its ssh user's home within ${SPARKC_HOME_ASK_SECONDS}s (cd && pwd there), which" \
      "container.mounts under ~/ need"
  elif ((status)); then
    fail "$node" "could not ask $node for its ssh user's home (cd && pwd), which container.mounts under ~/ need:" \
      "$(printf '%s' "$answer" | tail -n 3 | printable)"
  fi
  record_home "$node" "$answer"
  log "$node: ~/ is $answer"
  SPARKC_FAILED_NODE=""
}

# record_home NODE ANSWER: the node's home, once ANSWER passed home_problem.
record_home() {
  local problem
  problem=$(home_problem "$2")
  [[ -z $problem ]] || fail "$1" "$1 answered $problem: check that user's home and its login files there"
  SPARKC_HOME_AT[$1]=$2
}

# Why ANSWER (of `cd && pwd`) is no home for a -v source, or nothing: it must be one absolute path of a line,
# with none of docker's mount separators, no '..', not / itself.
home_problem() {
  local problem=""
  if [[ $1 != /* ]]; then
    problem="is not an absolute path"
  elif has_control "$1"; then
    problem="holds a control character (a line break, a tab, ...)"
  elif [[ $1 == *[:,]* ]]; then
    problem="holds ':' or ',', which docker's -v reads as separators"
  elif [[ $1/ == */../* || $1 =~ ^/+$ ]]; then
    problem="is / or climbs out with '..'"
  fi
  [[ -z $problem ]] || printf "'%s' for its ssh user's home (cd && pwd), which %s" "${1//[$'\t\n']/?}" "$problem"
}

# SPARKC_ARGV (a node's docker run, or its probe's): a -v source that stands for a folder of the node's own
# gets that node's: its copy of the patch folder, its home for ~/.
node_folders_argv() {
  local i source
  for i in "${!SPARKC_ARGV[@]}"; do
    ((i > 0)) && [[ ${SPARKC_ARGV[i - 1]} == -v ]] || continue
    source=${SPARKC_ARGV[i]}
    if ((SPARKC_HAS_HOOKS)) && [[ $source == "$SPARKC_PATCHES_PLACEHOLDER:"* ]]; then
      SPARKC_ARGV[i]=${SPARKC_PATCHES_AT[$1]}${source#"$SPARKC_PATCHES_PLACEHOLDER"}
    elif [[ -n $SPARKC_HOME_PLACEHOLDER && $source == "$SPARKC_HOME_PLACEHOLDER/"* ]]; then
      node_home "$1"  # asked already by the launch (ask_homes), unless a caller came here first
      SPARKC_ARGV[i]=${SPARKC_HOME_AT[$1]}${source#"$SPARKC_HOME_PLACEHOLDER"}
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
