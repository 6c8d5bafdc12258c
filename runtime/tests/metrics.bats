#!/usr/bin/env bats
# status.sh's reading of an engine's Prometheus text, its rates between two calls, and last-launch.txt's
# timeline: numbers out, whatever the text holds.

load helpers

setup() {
  load_runtime common.sh endpoint.sh metrics.sh
  SPARKC_SCRIPT_DIR=$BATS_TEST_TMPDIR
}

vllm_names() {
  SPARKC_METRICS_RUNNING=vllm:num_requests_running SPARKC_METRICS_WAITING=vllm:num_requests_waiting
  SPARKC_METRICS_KV_USAGE=(vllm:kv_cache_usage_perc vllm:gpu_cache_usage_perc)
  SPARKC_METRICS_PROMPT_TOKENS=vllm:prompt_tokens_total SPARKC_METRICS_GENERATION_TOKENS=vllm:generation_tokens_total
}

sglang_names() {
  SPARKC_METRICS_RUNNING=sglang:num_running_reqs SPARKC_METRICS_WAITING=sglang:num_queue_reqs
  SPARKC_METRICS_KV_USAGE=(sglang:token_usage)
  SPARKC_METRICS_PROMPT_TOKENS=sglang:prompt_tokens_total SPARKC_METRICS_GENERATION_TOKENS=sglang:generation_tokens_total
}

# vLLM's v1 shape with two data-parallel engines: gauges and counters per engine label, counters' _created
# samples beside them, a histogram that shares a prefix.
VLLM_TWO_ENGINES='# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="qwen"} 3.0
vllm:num_requests_running{engine="1",model_name="qwen"} 2.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="qwen"} 0.0
vllm:num_requests_waiting{engine="1",model_name="qwen"} 4.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="qwen"} 0.5
vllm:kv_cache_usage_perc{engine="1",model_name="qwen"} 0.25
# HELP vllm:prompt_tokens_total Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="0",model_name="qwen"} 1200.0
vllm:prompt_tokens_total{engine="1",model_name="qwen"} 800.0
# HELP vllm:prompt_tokens_created Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_created gauge
vllm:prompt_tokens_created{engine="0",model_name="qwen"} 1.7649e+09
# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="qwen"} 3.5e+03
vllm:generation_tokens_total{engine="1",model_name="qwen"} 1500.0
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.001",model_name="qwen"} 0.0
vllm:num_requests_running_total{engine="0",model_name="qwen"} 99.0'

@test "vLLM's samples are summed over its data-parallel engines, the KV cache's share averaged" {
  vllm_names
  run metrics_parse <<<"$VLLM_TWO_ENGINES"
  [ "$status" -eq 0 ]
  [ "$output" = $'running 5\nwaiting 4\nprompt 2000\ngeneration 5000\nengines 2\nkv 0.3750' ]
}

@test "vLLM's older KV-cache name counts where the newer one is missing" {
  vllm_names
  run metrics_parse <<<'vllm:gpu_cache_usage_perc{model_name="m"} 0.125
vllm:num_requests_running{model_name="m"} 1'
  [ "$output" = $'running 1\nengines 1\nkv 0.1250' ]
}

@test "SGLang's samples, labels holding braces, spaces and quotes, and a timestamp after the value" {
  sglang_names
  run metrics_parse <<<'# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="a} b \"c\" 9",engine_type="unified"} 7.0 1764900000000
sglang:num_queue_reqs{model_name="m"} 1.0
sglang:token_usage{model_name="m"} 0.28
sglang:prompt_tokens_total{model_name="m"} 8.128902e+06
sglang:generation_tokens_total{model_name="m"} 7.557572e+06'
  [ "$output" = $'running 7\nwaiting 1\nprompt 8128902\ngeneration 7557572\nengines 1\nkv 0.2800' ]
}

@test "NaN, infinities, negative and huge values, words, missing metrics: skipped, never printed" {
  vllm_names
  run metrics_parse <<<'vllm:num_requests_running{engine="0"} NaN
vllm:num_requests_running{engine="1"} +Inf
vllm:num_requests_waiting -1
vllm:kv_cache_usage_perc 1e300
vllm:prompt_tokens_total $(touch /tmp/pwned)
vllm:generation_tokens_total{engine="0"} 12'
  [ "$output" = "generation 12" ]
  [ ! -e /tmp/pwned ]
  run metrics_parse <<<'# nothing but comments'
  [ "$status" -eq 0 ] && [ -z "$output" ]
}

@test "control characters, a huge line and NUL bytes do not reach the output" {
  vllm_names
  run metrics_parse < <(
    printf 'vllm:num_requests_running{engine="\033]52;c;x\007"} 2\n'
    printf 'vllm:num_requests_waiting %s\n' "$(head -c 100000 /dev/zero | tr '\0' 9)"
    printf 'vllm:generation_tokens_total\0 5\n'
    printf 'vllm:prompt_tokens_total 3\r\n'
    printf 'vllm:prompt_tokens_total\t4\n'
  )
  [ "$output" = $'running 2\nprompt 4\nengines 1' ]
}

@test "a rate from the second call on, from the kept sample; counters that went back start again" {
  vllm_names
  run metrics_rates $'prompt 100\ngeneration 1000'
  [ "$status" -eq 1 ] && [ "$output" = "from the next call on" ]
  grep -qx 'prompt 100' "$SPARKC_SCRIPT_DIR/status-metrics.txt"
  # the kept sample as if taken 10 s ago
  sed -i "s/^time .*/time $(($(date +%s) - 10))/" "$SPARKC_SCRIPT_DIR/status-metrics.txt"
  run metrics_rates $'prompt 300\ngeneration 1500'
  [ "$status" -eq 0 ]
  [ "$(metrics_value seconds "$output" | cut -d. -f1)" -ge 10 ]
  [ "$(metrics_value generation_rate "$output" | cut -d. -f1)" -ge 45 ]
  [ "$(metrics_value generation_rate "$output" | cut -d. -f1)" -le 50 ]
  sed -i "s/^time .*/time $(($(date +%s) - 10))/" "$SPARKC_SCRIPT_DIR/status-metrics.txt"
  run metrics_rates $'prompt 5\ngeneration 5'
  [ "$status" -eq 1 ] && [[ $output == *"engine restarted"* ]]
}

@test "a hostile state file gives no rate and is replaced" {
  printf 'time $(reboot)\nprompt 1e400\n' >"$SPARKC_SCRIPT_DIR/status-metrics.txt"
  run metrics_rates $'prompt 1\ngeneration 2'
  [ "$status" -eq 1 ] && [ "$output" = "from the next call on" ]
  grep -qx 'generation 2' "$SPARKC_SCRIPT_DIR/status-metrics.txt"
}

@test "the timeline takes well-formed phase lines in order, and numbers only" {
  printf '%s\n' 'launched=2026-01-01T00:00:00Z' 'state=ready' 'phase.preflight=0 12' 'phase.containers=12 3' \
    'phase.Bad=1 1' 'phase.engine=15 x' 'phase.readiness=15 40 extra' 'phase.readiness=15 40' \
    'ready_after=57' 'first_token=0.123456' >"$SPARKC_SCRIPT_DIR/last-launch.txt"
  run launch_phases
  [ "$output" = $'preflight 0 12\ncontainers 12 3\nreadiness 15 40' ]
  [ "$(launch_number ready_after)" = 57 ]
  [ "$(launch_number first_token)" = 0.123456 ]
  printf 'first_token=$(id)\n' >>"$SPARKC_SCRIPT_DIR/last-launch.txt"
  [ -z "$(launch_number first_token)" ]
}

@test "json_string keeps printable ASCII and escapes quotes and backslashes" {
  [ "$(json_string $'a"b\\c\033d é')" = '"a\"b\\c?d ??"' ]
}
