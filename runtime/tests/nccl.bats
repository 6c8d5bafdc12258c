#!/usr/bin/env bats
# What NCCL says about its transport: the fabric probe's result line, NCCL's INFO lines in an engine's
# log, and NCCL version comparisons.

load helpers

setup() {
  load_runtime common.sh probe.sh launch.sh
  two_nodes
  declare -gA SPARKC_NCCL_WANT=([spark-a]=IB [spark-b]=Socket)
  SPARKC_DRY_RUN=0
  # the phase's bookkeeping and its end: what check_fabric decides is what these record
  phase() { :; }
  phase_done() { :; }
  fail() { echo "FAIL $1: ${*:2}"; exit 1; }
}

@test "probe_field reads strings and numbers of the probe's result line" {
  local line='SPARKC_PROBE {"node": "spark-a", "transport": "IB", "busbw_gbps": 21.5, "nccl": "2.27.3", "error": ""}'
  [ "$(probe_field transport "$line")" = IB ]
  [ "$(probe_field busbw_gbps "$line")" = 21.5 ]
  [ "$(probe_field nccl "$line")" = 2.27.3 ]
  [ "$(probe_field error "$line")" = "" ]
  [ "$(probe_field absent "$line")" = "" ]
}

@test "probe_field takes a number in exponent form and the first of two fields" {
  local line='SPARKC_PROBE {"busbw_gbps": 1.2e-05, "transport": "Socket", "transport": "IB"}'
  [ "$(probe_field busbw_gbps "$line")" = 1.2e-05 ]
  [ "$(probe_field transport "$line")" = Socket ]
}

@test "version_below compares NCCL versions part by part, as numbers" {
  version_below 2.27.3 2.30.7
  version_below 2.9.0 2.10.0
  run version_below 2.30.7 2.30.7
  [ "$status" -ne 0 ]
  run version_below 2.31 2.30.7
  [ "$status" -ne 0 ]
  version_below garbage 2.30.7
}

@test "NCCL on sockets where RDMA is wanted fails the launch, quoting NCCL's line" {
  on_node() {
    printf '%s\n' 'spark-a:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0' 'other line'
  }
  run check_fabric
  [ "$status" -eq 1 ]
  [[ ${lines[0]} == "FAIL spark-a: NCCL fell back to sockets"* ]]
  [[ $output == *"'Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0'"* ]]
}

@test "NCCL on RDMA passes and names its channels" {
  on_node() {
    if [[ $1 == spark-a ]]; then
      echo 'spark-a:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA'
    else
      echo 'spark-b:1:1 [0] NCCL INFO Using network Socket'
    fi
  }
  run check_fabric
  [ "$status" -eq 0 ]
  [[ ${lines[0]} == *"spark-a: NCCL channels via NET/IB" ]]
  [[ ${lines[1]} == *"spark-b: NCCL channels Using network Socket" ]]
}

@test "a log without transport lines is a warning, not a verdict" {
  on_node() { echo 'INFO: engine started'; }
  run check_fabric
  [ "$status" -eq 0 ]
  [[ $output == *"spark-a: no NCCL transport lines in its log"* ]]
}
