# Loads parts of the runtime (runtime/*.sh) into a bats test, as a generated script sources its library,
# with no cluster: the constants a compile would write are set by each test.
RUNTIME=$(cd -- "$BATS_TEST_DIRNAME/.." && pwd)

# Source PARTS (file names under runtime/). bats runs setup in a function, where a top-level `declare`
# would make a local that ends with it: each part's `declare` becomes global, as it is in a script. The
# library points fd 3 (dry-run lines) at its stdout and sets its own EXIT trap; bats reports through both
# (a failing test would vanish without its trap), so both are given back.
load_runtime() {
  local part saved traps
  traps=$(trap -p EXIT)
  exec {saved}>&3
  for part in "$@"; do
    # shellcheck disable=SC1090
    source <(sed 's/^declare /declare -g /' "$RUNTIME/$part")
  done
  exec 3>&"$saved" {saved}>&-
  trap - EXIT
  eval "$traps"
}

# Two nodes, as a compile of a two-node spec writes them: the head (run here) and a worker over ssh.
two_nodes() {
  declare -gA SPARKC_TARGET=([spark-a]='' [spark-b]='admin@spark-b.local')
  declare -gA SPARKC_CONTAINER=([spark-a]=sparkc-demo-spark-a [spark-b]=sparkc-demo-spark-b)
  SPARKC_NODES=(spark-a spark-b)
  SPARKC_HEAD=spark-a
  SPARKC_SSH_OPTS=(-o BatchMode=yes)
  SPARKC_SSH_MUX=()
}
