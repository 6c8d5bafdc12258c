#!/usr/bin/env bats
# The dry run's seam: sparkc_run runs a command on a node, or under --dry-run prints it, pasteable.

load helpers

setup() {
  load_runtime common.sh
  two_nodes
  SPARKC_DRY_RUN=0
}

# What sparkc_run printed on fd 3 (the script's stdout), as `run` sees it.
run_printed() { sparkc_run "$@" 3>&1; }

@test "a dry run prints the command with its node and runs nothing" {
  SPARKC_DRY_RUN=1
  run run_printed spark-a touch "$BATS_TEST_TMPDIR/made"
  [ "$status" -eq 0 ]
  [ "$output" = "[spark-a] touch $BATS_TEST_TMPDIR/made" ]
  [ ! -e "$BATS_TEST_TMPDIR/made" ]
}

@test "a dry run opens no ssh connection to a worker" {
  SPARKC_DRY_RUN=1
  ssh() { echo called >"$BATS_TEST_TMPDIR/ssh"; }
  run run_printed spark-b docker rm sparkc-demo-spark-b
  [ "$output" = "[spark-b] docker rm sparkc-demo-spark-b" ]
  [ ! -e "$BATS_TEST_TMPDIR/ssh" ]
}

@test "without --dry-run the command runs on the head itself" {
  run sparkc_run spark-a touch "$BATS_TEST_TMPDIR/made"
  [ "$status" -eq 0 ]
  [ -e "$BATS_TEST_TMPDIR/made" ]
}

@test "without --dry-run a worker's command goes over ssh as one quoted line" {
  ssh() { printf '%s\n' "$@" >"$BATS_TEST_TMPDIR/ssh"; }
  sparkc_run spark-b docker rm "a b" "it's"
  mapfile -t words <"$BATS_TEST_TMPDIR/ssh"
  [ "${words[0]}" = -o ] && [ "${words[1]}" = BatchMode=yes ]
  [ "${words[2]}" = admin@spark-b.local ] && [ "${words[3]}" = -- ]
  [ "${words[4]}" = "'docker' 'rm' 'a b' 'it'\\''s' " ]
}

@test "the command's failure is the runner's" {
  run sparkc_run spark-a false
  [ "$status" -ne 0 ]
}

@test "a printed line pastes back into the same words" {
  SPARKC_DRY_RUN=1
  local words=(docker run -e 'A=b c' "it's" '$(reboot)' '*' 'semi;colon' '')
  run run_printed spark-a "${words[@]}"
  eval "set -- ${output#"[spark-a] "}"
  local got=("$@")
  [ "${got[*]@Q}" = "${words[*]@Q}" ]
}

@test "a long command prints one flag and its value per line" {
  SPARKC_DRY_RUN=1
  run run_printed spark-b docker run -d --name sparkc-demo-spark-b --network host -e NCCL_DEBUG=INFO \
    -v /models:/models:ro --ipc host vllm/vllm-openai:v0.11.2 serve /models/qwen3
  [ "${lines[0]}" = "[spark-b] docker run \\" ]
  [ "${lines[1]}" = "    -d \\" ]
  [ "${lines[2]}" = "    --name sparkc-demo-spark-b \\" ]
  [ "${lines[4]}" = "    -e NCCL_DEBUG=INFO \\" ]
  [ "${lines[6]}" = "    --ipc host \\" ]
  [ "${lines[-1]}" = "    /models/qwen3" ]
}

@test "dry_run answers the --dry-run option" {
  SPARKC_DRY_RUN=1
  dry_run
  SPARKC_DRY_RUN=0
  run dry_run
  [ "$status" -ne 0 ]
}
