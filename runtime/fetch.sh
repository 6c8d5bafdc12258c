fetch_usage() {
  cat <<USAGE
Usage: fetch-model.sh [--dry-run]

Downloads ${SPARKC_FETCH_REPO:-model.repo} at $SPARKC_FETCH_REVISION into $SPARKC_FETCH_TARGET on this node, the
head, and the draft model of model.draft.repo into its own folder, inside the deployment's image
(docker run --rm, which needs huggingface_hub), then says to run distribute.sh, which copies the weights
on to the other nodes. HF_TOKEN (for gated or private repos) and HF_ENDPOINT (a mirror) are read from
this environment and passed by name, never on a command line.
The repo's size is compared with the free space first; a file already complete is skipped, so running
it again after an interruption continues, and a dropped connection resumes its file where it broke off.
One line per file as it goes.
Exit status: 0 done, 1 the download failed or the disk lacks room, 2 usage or no model.repo.
USAGE
}

# The download's program (runtime/fetch.py), run by python3 -c inside the image.
# shellcheck disable=SC2016  # Python's text, not the shell's
# sparkc-embed SPARKC_FETCH_PY fetch.py
fetch_main() {
  while (($#)); do
    case $1 in
      --dry-run) SPARKC_DRY_RUN=1 ;;
      -h | --help) fetch_usage; exit 0 ;;
      *) echo "fetch-model.sh: unknown option: $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
  done
  if [[ -z $SPARKC_FETCH_REPO ]]; then
    echo "fetch-model.sh: the spec names no model.repo: add model.repo (the Hugging Face repo id, ORG/NAME)" \
      "and compile again" >&2
    exit 2
  fi
  fetch_repo "$SPARKC_FETCH_REPO" "$SPARKC_FETCH_REVISION" "$SPARKC_FETCH_TARGET" "$SPARKC_FETCH_MODE" fetch-report.txt || exit 1
  if [[ -n $SPARKC_FETCH_DRAFT_REPO ]]; then
    # The draft beside the model: its own folder, at its main revision.
    fetch_repo "$SPARKC_FETCH_DRAFT_REPO" main "$SPARKC_FETCH_DRAFT_TARGET" folder fetch-draft-report.txt || exit 1
  fi
  dry_run || log "run distribute.sh to copy the downloads to the other nodes"
}

# fetch_repo REPO REVISION TARGET MODE REPORT: one repo downloaded into TARGET on the head, its report in
# SPARKC_SCRIPT_DIR/REPORT.
fetch_repo() {
  local repo=$1 revision=$2 target=$3 mode=$4 report=$5
  # As the operator's user, so the files are theirs; huggingface_hub's own state in a folder it can write.
  local argv=(docker run --rm --name "$SPARKC_FETCH_CONTAINER" --network host --user "$(id -u):$(id -g)"
    -e HF_HOME=/tmp/sparkc-hf-home
    -v "$target:$target"
    -e HF_TOKEN
    -e HF_ENDPOINT
  )
  if [[ -t 1 ]]; then
    argv+=(-t)  # huggingface_hub's progress bars, on a terminal
  else
    argv+=(
      -e HF_HUB_DISABLE_PROGRESS_BARS=1
    )  # one line per file instead
  fi
  argv+=(--entrypoint python3 "$SPARKC_IMAGE" -c)
  log "$repo at $revision into $target ($mode), in image $SPARKC_IMAGE"
  if dry_run; then
    dry_print "$SPARKC_HEAD" mkdir -p "$target"
    dry_print "$SPARKC_HEAD" "${argv[@]}" "<the program in runtime/fetch.py>" "$repo" "$revision" "$target" "$mode"
    return 0
  fi
  mkdir -p -- "$target" || { warn "cannot create $target on $SPARKC_HEAD"; return 1; }
  local out=$SPARKC_SCRIPT_DIR/$report status=0 new
  new=$(fresh_file "$out") || return 1
  "${argv[@]}" "$SPARKC_FETCH_PY" "$repo" "$revision" "$target" "$mode" </dev/null | tee "$new" || status=$?
  place_file "$new" "$out" || return 1
  if ! grep -q '^SPARKC_FETCH {.*"ok": true' "$out"; then
    local why
    why=$(sed -n 's/^SPARKC_FETCH .*"error": "\(.*\)", "ok": false}.*/\1/p' "$out" | tail -n 1)
    warn "the download of $repo failed${why:+: $why} (exit $status); the report is in $out"
    return 1
  fi
  log "done: $repo is in $target on $SPARKC_HEAD"
}
