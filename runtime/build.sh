build_usage() {
  cat <<USAGE
Usage: build-image.sh [--dry-run]

Builds the image $SPARKC_IMAGE on this node, the head, with docker build: the Dockerfile
$SPARKC_BUILD_DOCKERFILE in the folder $SPARKC_BUILD_CONTEXT, with the spec's build arguments
(container.build.args, one --build-arg each), then records the ID of the image built in
$SPARKC_BUILT_IMAGE_RECORD beside this script. Run it first, then distribute.sh, which copies the image to the
other nodes, then launch-cluster.sh.

  --dry-run   print the docker commands, run nothing
  -h, --help  this text

Exit status: 0 built, 1 the folder or the Dockerfile is missing or the build failed, 2 usage.
USAGE
}

build_main() {
  while (($#)); do
    case $1 in
      --dry-run) SPARKC_DRY_RUN=1 ;;
      -h | --help) build_usage; exit 0 ;;
      *) echo "build-image.sh: unknown option: $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
  done
  # Each build argument is one word of docker's own command line, never read by a shell.
  local argv=(docker build --tag "$SPARKC_IMAGE" --file "$SPARKC_BUILD_DOCKERFILE") arg
  for arg in "${SPARKC_BUILD_ARGS[@]}"; do argv+=(--build-arg "$arg"); done
  argv+=("$SPARKC_BUILD_CONTEXT")
  local inspect=(docker image inspect --format '{{.Id}}' "$SPARKC_IMAGE")
  log "image $SPARKC_IMAGE: building $SPARKC_BUILD_DOCKERFILE in $SPARKC_BUILD_CONTEXT on $SPARKC_HEAD"
  if dry_run; then
    dry_print "$SPARKC_HEAD" "${argv[@]}"
    dry_print "$SPARKC_HEAD" "${inspect[@]}"
    return 0
  fi
  [[ -d $SPARKC_BUILD_CONTEXT ]] || {
    warn "the build folder $SPARKC_BUILD_CONTEXT is missing on $SPARKC_HEAD: check out the repository there (container.build.context)"
    exit 1
  }
  [[ -f $SPARKC_BUILD_DOCKERFILE ]] || {
    warn "$SPARKC_BUILD_DOCKERFILE is missing on $SPARKC_HEAD (container.build.dockerfile, inside the build folder)"
    exit 1
  }
  "${argv[@]}" </dev/null || { warn "docker build of $SPARKC_IMAGE failed; its output is above"; exit 1; }
  local id new out=$SPARKC_SCRIPT_DIR/$SPARKC_BUILT_IMAGE_RECORD
  id=$("${inspect[@]}") && [[ $id =~ ^sha256:[0-9a-f]{64}$ ]] || {
    warn "docker built $SPARKC_IMAGE but does not say its image ID: $(printable "${id:-no answer}")"
    exit 1
  }
  new=$(fresh_file "$out") || exit 1
  printf '%s %s\n' "$SPARKC_IMAGE" "$id" >"$new"
  place_file "$new" "$out" || exit 1
  log "built $SPARKC_IMAGE: $id (recorded in $out); run distribute.sh to copy it to the other nodes"
}
