#!/usr/bin/env bats
# The engine's start check of free memory (memory.sh): its arithmetic on a node's /proc/meminfo.

load helpers

GIB=1048576 # KiB

setup() {
  load_runtime common.sh preflight.sh memory.sh
  two_nodes
  declare -gA SPARKC_GPUS=([spark-a]=1 [spark-b]=1)
  SPARKC_DEPLOYMENT=demo
  SPARKC_START_GATE_PPM=800000 # vLLM's gpu_memory_utilization 0.8
  SPARKC_START_GATE_FRACTION=0.8
  SPARKC_START_GATE_SOURCE=gpu_memory_utilization
  SPARKC_START_GATE_ENGINE=vLLM
  SPARKC_START_GATE_OVERHEAD_KB=$((2 * GIB))
  SPARKC_DROP_PAGE_CACHE=0
}

# The node's answer as the preflight gathers it: /proc/meminfo lines under "memory", its container.
meminfo() { # NODE TOTAL_KB AVAILABLE_KB [CACHED_KB]
  SPARKC_PF[$1,memory]="MemTotal: $2 kB"$'\n'"MemAvailable: $3 kB"$'\n'"Cached: ${4:-0} kB"$'\n'
  SPARKC_PF[$1,container]=$'missing\n'
}

@test "kib_gib rounds down to one decimal" {
  [ "$(kib_gib $((GIB * 3 / 2)))" = 1.5 ]
  [ "$(kib_gib $((GIB * 128 - 1)))" = 127.9 ]
  [ "$(kib_gib 0)" = 0.0 ]
}

@test "a node with room for the fraction after the engine's own init passes" {
  meminfo spark-a $((128 * GIB)) $((106 * GIB)) # 0.8 x 128 = 102.4 GiB, 104 left after init
  judge_start_gate spark-a
  [ "${#SPARKC_PF_PROBLEMS[@]}" -eq 0 ]
}

@test "a node short of it is a problem, with the largest fraction that starts" {
  meminfo spark-a $((128 * GIB)) $((100 * GIB)) # 98 GiB after init: 98/128 = 0.765
  judge_start_gate spark-a
  [ "${#SPARKC_PF_PROBLEMS[@]}" -eq 1 ]
  [ "${SPARKC_PF_PROBLEM_NODES[0]}" = spark-a ]
  [[ ${SPARKC_PF_PROBLEMS[0]} == *"has 100.0 of 128.0 GiB of memory available"* ]]
  [[ ${SPARKC_PF_PROBLEMS[0]} == *"= 102.4 GiB free after its own init"* ]]
  [[ ${SPARKC_PF_PROBLEMS[0]} == *"leaves 98.0 GiB"* ]]
  [[ ${SPARKC_PF_PROBLEMS[0]} == *"gpu_memory_utilization to at most 0.76 "* ]]
  [ "${SPARKC_PF_NOTES[spark-a,memory]}" = "100.0G avail < 0.8" ]
}

@test "the boundary: exactly the fraction after init passes, one KiB less does not" {
  local need=$(((128 * GIB * 800000 + 999999) / 1000000))
  meminfo spark-a $((128 * GIB)) $((need + 2 * GIB))
  judge_start_gate spark-a
  [ "${#SPARKC_PF_PROBLEMS[@]}" -eq 0 ]
  meminfo spark-b $((128 * GIB)) $((need + 2 * GIB - 1))
  judge_start_gate spark-b
  [ "${#SPARKC_PF_PROBLEMS[@]}" -eq 1 ]
}

@test "page cache worth dropping is named as a fix, unless the launch drops it already" {
  meminfo spark-a $((128 * GIB)) $((90 * GIB)) $((20 * GIB))
  judge_start_gate spark-a
  [[ ${SPARKC_PF_PROBLEMS[0]} == *"drop the 20.0 GiB of page cache"* ]]
  SPARKC_PF_PROBLEMS=()
  SPARKC_DROP_PAGE_CACHE=1
  judge_start_gate spark-a
  [[ ${SPARKC_PF_PROBLEMS[0]} != *"page cache"* ]]
}

@test "the memory this deployment's running container holds counts as coming back" {
  meminfo spark-a $((128 * GIB)) $((60 * GIB))
  SPARKC_PF[spark-a,container]=$'running demo vllm\n'
  # the words compiled for the node: own_budget_kb reads them into its local array `words`
  compiled_run() { words=(docker run --label "sparkc.memory-budget=$((50 * GIB * 1024))" img); }
  judge_start_gate spark-a
  [ "${#SPARKC_PF_PROBLEMS[@]}" -eq 0 ]
}

@test "no check where the node's meminfo says nothing, or the node is no single-GPU Spark" {
  SPARKC_PF[spark-a,memory]=""
  run judge_start_gate spark-a
  [[ $output == *"/proc/meminfo gave no MemTotal and MemAvailable"* ]]
  SPARKC_GPUS[spark-b]=2
  meminfo spark-b $((128 * GIB)) $((1 * GIB))
  judge_start_gate spark-b
  [ "${#SPARKC_PF_PROBLEMS[@]}" -eq 0 ]
}

@test "a check that is off judges nothing" {
  SPARKC_START_GATE_PPM=0
  meminfo spark-a $((128 * GIB)) $((1 * GIB))
  judge_start_gate spark-a
  [ "${#SPARKC_PF_PROBLEMS[@]}" -eq 0 ]
}
