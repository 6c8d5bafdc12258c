# The weights on each node: revision, Hugging Face snapshot, links that lead nowhere; and the page cache.
# Each check takes one node, so preflight can run them node after node or all nodes at once.

# Run on a node by any POSIX sh: what the weights folder says about its revision, and its dangling links.
# $1 folder, $2 revision, $3 "ref"/"pinned" for a Hugging Face repo folder ("" otherwise). Prints
# "snapshot COMMIT" (a cache snapshot), "ref COMMIT" (what refs/REVISION names), "git COMMIT [BRANCH]"
# (a git checkout), "missing DIR", "dangling PATH" (at most 5).
# shellcheck disable=SC2016  # expanded by the node's sh
# sparkc-embed SPARKC_MODEL_FACTS_SH node/model-facts.sh

declare -A SPARKC_SNAPSHOT_COMMIT=()
declare -A SPARKC_MODEL_FACTS_OF=() # each node's answer to SPARKC_MODEL_FACTS_SH for the weights, from its preflight

# The weights' facts come with each node's preflight answer (check_weights); check_model_revision then
# judges them in node order (a node without a full answer is asked again there, so its error is
# reported as before).
gather_model_facts() {
  dry_run && return 0
  local node
  for node in "${SPARKC_NODES[@]}"; do
    if [[ -n ${SPARKC_PF[$node,end]+x} ]]; then SPARKC_MODEL_FACTS_OF[$node]=$(pf "$node" weights); fi
  done
}

# The node's weights carry the spec's revision (where they say which they are) and no link into nothing;
# a Hugging Face branch or tag names the same commit on every node.
check_model_revision() {
  local node=$1 facts line commit="" ref="" git="" branch="" other
  dry_run && return 0 # asked with the preflight checks (weights), printed there
  if [[ -n ${SPARKC_MODEL_FACTS_OF[$node]+x} ]]; then
    facts=${SPARKC_MODEL_FACTS_OF[$node]}
  else
    facts=$(on_node "$node" sh -c "$SPARKC_MODEL_FACTS_SH" sh "$SPARKC_MODEL_FOLDER" "$SPARKC_MODEL_REVISION" "$SPARKC_MODEL_HF" 2>&1) \
      || fail "$node" "could not look into $SPARKC_MODEL_FOLDER on $node: $facts"
  fi
  while read -r line; do
    case $line in
      "noref "*) fail "$node" "the Hugging Face cache on $node has no ${line#noref}: revision $SPARKC_MODEL_REVISION" \
        "was never downloaded there. Download it on every node, or pin model.revision to a commit" ;;
      "missing "*) fail "$node" "the snapshot ${line#missing } does not exist on $node: the cache does not hold" \
        "revision $SPARKC_MODEL_REVISION. Download it there (huggingface-cli download --revision $SPARKC_MODEL_REVISION)" ;;
      "dangling "*) fail "$node" "${line#dangling } on $node is a link to a file that does not exist (an" \
        "interrupted download or copy); the engine would fail on it after a long load. Download or copy the" \
        "weights again" ;;
      cut) warn "$node: the look for links into nothing in $SPARKC_MODEL_FOLDER took over 10 s and was cut there" ;;
      "snapshot "*) commit=${line#snapshot } ;;
      "ref "*) ref=${line#ref } ;;
      "git "*) read -r git branch <<<"${line#git }" ;;
    esac
  done <<<"$facts"
  if [[ -n $SPARKC_MODEL_HF ]]; then
    SPARKC_SNAPSHOT_COMMIT[$node]=$commit
    for other in "${!SPARKC_SNAPSHOT_COMMIT[@]}"; do
      [[ ${SPARKC_SNAPSHOT_COMMIT[$other]} == "$commit" ]] || fail "$node" "revision $SPARKC_MODEL_REVISION is commit $commit" \
        "on $node but ${SPARKC_SNAPSHOT_COMMIT[$other]} on $other: every node must serve the same weights. Update" \
        "the caches, or pin model.revision to one commit"
    done
    return 0
  fi
  [[ -n $SPARKC_MODEL_REVISION ]] || return 0
  if [[ -n $commit ]]; then
    revision_matches "$commit" "${ref:-}" || fail "$node" "$SPARKC_MODEL_FOLDER on $node is snapshot $commit," \
      "not revision $SPARKC_MODEL_REVISION${ref:+ (refs/$SPARKC_MODEL_REVISION names $ref)}: fix model.path or model.revision"
  elif [[ -n $git ]]; then
    revision_matches "$git" "$branch" || fail "$node" "$SPARKC_MODEL_FOLDER on $node is a git checkout of $git" \
      "${branch:+(branch $branch)}, not revision $SPARKC_MODEL_REVISION: check out that revision, or fix model.revision"
  else
    warn "$node: $SPARKC_MODEL_FOLDER records no revision (no Hugging Face snapshot folder, no .git): revision" \
      "$SPARKC_MODEL_REVISION is not checked there"
  fi
}

# The spec's revision names this commit: the commit itself (or at least 7 leading hex digits of it),
# the branch checked out, or the commit the cache's refs/ gives for it.
revision_matches() {
  local commit=$1 name=$2
  [[ $SPARKC_MODEL_REVISION == "$name" || $SPARKC_MODEL_REVISION == "$commit" ]] && return 0
  [[ ${#SPARKC_MODEL_REVISION} -ge 7 && $SPARKC_MODEL_REVISION =~ ^[0-9a-f]+$ && $commit == "$SPARKC_MODEL_REVISION"* ]] && return 0
  [[ -n $name && $name == "$commit" ]]
}

# The draft model's folder exists on the node and holds no link into nothing: judged from the node's
# preflight answer (judge_draft); asked here only where there was none (a dry run prints the commands).
check_draft_model() {
  local node=$1 facts
  [[ -n $SPARKC_DRAFT_FOLDER ]] || return 0
  [[ -z ${SPARKC_PF[$node,end]+x} ]] || return 0
  sparkc_run "$node" test -d "$SPARKC_DRAFT_FOLDER" \
    || fail "$node" "draft model directory $SPARKC_DRAFT_FOLDER does not exist on $node: copy it to the same path" \
      "on every node"
  dry_run && return 0
  facts=$(on_node "$node" sh -c "$SPARKC_MODEL_FACTS_SH" sh "$SPARKC_DRAFT_FOLDER" "" "" 2>&1) || facts=""
  if [[ $facts == *"dangling "* ]]; then
    facts=${facts#*dangling }
    fail "$node" "${facts%%$'\n'*} on $node is a link to a file that does not exist: copy the draft model again"
  fi
}

# The commit a Hugging Face branch or tag names, in a `docker run` word: from preflight, or (preflight
# skipped) as the head's cache says.
substitute_snapshot() {
  [[ -n $SPARKC_SNAPSHOT_PLACEHOLDER ]] || return 0
  local i commit=${SPARKC_SNAPSHOT_COMMIT[$SPARKC_HEAD]:-}
  if [[ -z $commit ]] && ! dry_run; then
    commit=$(on_node "$SPARKC_HEAD" cat "$SPARKC_MODEL_FOLDER/refs/$SPARKC_MODEL_REVISION" 2>/dev/null) \
      || fail "$SPARKC_HEAD" "the Hugging Face cache has no $SPARKC_MODEL_FOLDER/refs/$SPARKC_MODEL_REVISION"
  fi
  [[ -n $commit ]] || return 0
  for i in "${!SPARKC_ARGV[@]}"; do
    SPARKC_ARGV[i]=${SPARKC_ARGV[i]//"$SPARKC_SNAPSHOT_PLACEHOLDER"/$commit}
  done
}

# On unified memory the page cache (a copy of the weights just made, say) counts against the engine's
# budget, and SGLang compares free memory between ranks: drop it on every node before the load.
drop_page_caches() {
  ((SPARKC_DROP_PAGE_CACHE)) || return 0
  phase memory "drop the page cache on every node"
  local node
  for node in "${SPARKC_NODES[@]}"; do
    drop_page_cache "$node"
  done
  phase_done
}

drop_page_cache() {
  local node=$1 out
  # shellcheck disable=SC2016  # for the node's sh
  local script='sync && if [ "$(id -u)" = 0 ]; then echo 3 > /proc/sys/vm/drop_caches; else sudo -n sh -c "echo 3 > /proc/sys/vm/drop_caches"; fi'
  out=$(sparkc_run "$node" sh -c "$script" 2>&1) \
    || fail "$node" "could not drop the page cache on $node: ${out:-no answer}. It needs root: run the launch" \
      "as root, allow this user 'sudo -n' for it, or set launch.drop_page_cache: false"
  dry_run || log "$node: page cache dropped"
}
