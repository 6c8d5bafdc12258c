#!/usr/bin/env bats
# launch-cluster.sh --env NAME=VALUE: which names it may set, as the compiler decides for a secret.

load helpers

setup() {
  load_runtime common.sh launch.sh
  SPARKC_RESERVED_NAMES='IFS PATH HOME SECONDS'
  SPARKC_SECRET_NAME_PATTERN='(^|_)(TOKEN|SECRET|PASSWORD|PASSWD|API_KEY|ACCESS_KEY|PRIVATE_KEY)(_|$)'
  SPARKC_SECRETS=(MY_CREDENTIAL)
  SPARKC_EXTRA_ENV=()
}

@test "the shell's own names and the SPARKC_, BASH_ and LC_ prefixes are reserved" {
  for name in PATH IFS SPARKC_TIMEOUT SPARKC_ANYTHING BASH_ENV LC_ALL; do
    env_name_reserved "$name"
  done
}

@test "tools' names and the user's own are not reserved" {
  for name in NCCL_DEBUG VLLM_HOST_IP HF_HOME TIMEOUT HEAD MY_SPARKC SPARK_C PATHS; do
    run env_name_reserved "$name"
    [ "$status" -ne 0 ]
  done
}

@test "a reserved name is refused with the rule, exit 2" {
  run add_extra_env SPARKC_HEAD=spark-z
  [ "$status" -eq 2 ]
  [[ $output == *"--env SPARKC_HEAD: the shell's own name, or one starting with SPARKC_, BASH_ or LC_"* ]]
}

@test "a name that is free is kept with its value, as given" {
  add_extra_env 'NCCL_DEBUG=WARN'
  add_extra_env 'TIMEOUT=a b=c'
  [ "${SPARKC_EXTRA_ENV[*]@Q}" = "'NCCL_DEBUG=WARN' 'TIMEOUT=a b=c'" ]
}

@test "secrets, malformed names, control characters and repeats are refused" {
  run add_extra_env HF_TOKEN=x
  [[ $status -eq 2 && $output == *"--env HF_TOKEN looks like a secret"* ]]
  run add_extra_env MY_CREDENTIAL=x
  [[ $status -eq 2 && $output == *"looks like a secret"* ]]
  run add_extra_env lower=1
  [[ $status -eq 2 && $output == *"names are upper-case"* ]]
  run add_extra_env NOVALUE
  [[ $status -eq 2 && $output == *"--env needs 'NAME=VALUE'"* ]]
  run add_extra_env $'X=a\nb'
  [[ $status -eq 2 && $output == *"control characters"* ]]
  add_extra_env X=1
  run add_extra_env X=2
  [[ $status -eq 2 && $output == *"--env X is given twice"* ]]
}
