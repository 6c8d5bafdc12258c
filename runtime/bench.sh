bench_usage() {
  cat <<USAGE
Usage: bench.sh [--concurrency LIST] [--input-len N] [--output-len N] [--prompts N] [--timeout SECONDS]
                [--out DIR] [--dry-run]

Runs the engine's own serving benchmark (${BENCH_COMMAND[*]:0:3} ...) in the deployment's image on this
node, the head, against the live endpoint, once per concurrency (default $BENCH_CONCURRENCIES), with random
prompts of --input-len tokens (default $BENCH_INPUT_LEN) asking for --output-len (default $BENCH_OUTPUT_LEN),
--prompts per run (default 4 x the concurrency, at least 8); so no data set is downloaded. The API key,
where the deployment has one, is passed by name. Each run has --timeout seconds (default 600) and is
stopped after them. Writes one JSON per run, summary.md and summary.json (with the spec's sha256 and
the image ID, so two runs can be compared) into DIR (default bench/<time>/ beside this script) and
prints the summary: output tokens/s, requests/s, TTFT and inter-token latency (median, p99).
Exit status: 0 every run finished, 1 a run failed or timed out, 2 usage.
USAGE
}

# Reads the runs' JSON and writes the summary (runtime/bench_summary.py), with the head's python3.
# shellcheck disable=SC2016  # Python's text, not the shell's
# sparkc-embed BENCH_SUMMARY_PY bench_summary.py
bench_main() {
  local list=$BENCH_CONCURRENCIES input=$BENCH_INPUT_LEN output=$BENCH_OUTPUT_LEN prompts="" limit=600 dir=""
  while (($#)); do
    case $1 in
      --concurrency)
        [[ ${2:-} =~ ^[1-9][0-9]{0,3}(,[1-9][0-9]{0,3})*$ ]] \
          || bench_usage_error "--concurrency needs numbers from 1 to 9999, separated by commas (1,4,16)"
        list=$2
        shift
        ;;
      --input-len | --output-len | --prompts | --timeout)
        [[ ${2:-} =~ ^[1-9][0-9]{0,6}$ ]] || bench_usage_error "$1 needs a whole number from 1 to 9999999"
        case $1 in
          --input-len) input=$2 ;;
          --output-len) output=$2 ;;
          --prompts) prompts=$2 ;;
          --timeout) limit=$2 ;;
        esac
        shift
        ;;
      --out)
        [[ -n ${2:-} ]] || bench_usage_error "--out needs a folder"
        dir=$2
        shift
        ;;
      --dry-run) DRY_RUN=1 ;;
      -h | --help) bench_usage; exit 0 ;;
      *) bench_usage_error "unknown option: $1 (see --help)" ;;
    esac
    shift
  done
  use_api_port "$(last_launch_port)"
  local key=""
  if [[ -n $API_KEY_VAR ]]; then
    key=${!API_KEY_VAR:-}
    [[ -n $key ]] || bench_usage_error "the endpoint needs its API key: export $API_KEY_VAR where bench.sh runs"
  elif [[ -n $API_KEY_GIVEN ]]; then
    key=$API_KEY_GIVEN
  fi
  local snapshot="" image_id="" level i=0 count failed=0 levels=() new fd stamp
  stamp=$(date -u +%Y%m%dT%H%M%SZ)
  IFS=, read -r -a levels <<<"$list"
  log "benchmark of $DEPLOYMENT at $PROBE_URL: concurrency ${levels[*]}, $input tokens in, $output out"
  if ((DRY_RUN == 0)); then
    if [[ -z $dir ]]; then
      new_folder "$SCRIPT_DIR/bench" "$stamp" || exit 1
      dir=$NEW_FOLDER
    fi
    own_path "$dir" folder && mkdir -p -- "$dir" || exit 1
    image_id=$(docker image inspect --format '{{.Id}}' "$IMAGE") || { warn "no image $IMAGE on $HEAD"; exit 1; }
    if [[ -n $BENCH_SNAPSHOT_REF ]]; then
      snapshot=$(cat -- "$BENCH_SNAPSHOT_REF") || { warn "cannot read $BENCH_SNAPSHOT_REF"; exit 1; }
    fi
  fi
  [[ -n $dir ]] || dir=$SCRIPT_DIR/bench/$stamp  # what a dry run shows
  for level in "${levels[@]}"; do
    i=$((i + 1))
    count=${prompts:-$((level * 4 > 8 ? level * 4 : 8))}
    bench_argv "$level" "$count" "$input" "$output" "$dir" "$snapshot"
    if ((DRY_RUN)); then
      dry_print "$HEAD" "${ARGV[@]}"
      continue
    fi
    log "[$i/${#levels[@]}] concurrency $level: $count prompts (at most ${limit}s)"
    own_path "$dir/concurrency-$level.json" || exit 1  # the benchmark writes it
    new=$(fresh_file "$dir/concurrency-$level.log") || exit 1
    exec {fd}>"$new"
    place_file "$new" "$dir/concurrency-$level.log" || exit 1
    local started=$SECONDS status=0
    # The key goes to docker by name (-e OPENAI_API_KEY), exported in a subshell: never a word of a command
    # line, which any user reads in /proc/PID/cmdline. Both benchmarks read it from that variable.
    (
      export OPENAI_API_KEY=$key
      exec timeout --kill-after=10 "$limit" "${ARGV[@]}"
    ) >&"$fd" 2>&1 </dev/null || status=$?
    exec {fd}>&-
    if ((status == 124 || status == 137)); then
      docker rm -f "$BENCH_CONTAINER-$level" >/dev/null 2>&1 || true
      warn "concurrency $level: stopped after ${limit}s (--timeout); its output is in $dir/concurrency-$level.log"
      failed=1
    elif ((status)); then
      warn "concurrency $level: the benchmark failed (exit $status); the end of its output:"
      tail -n 5 "$dir/concurrency-$level.log" | printable >&2
      failed=1
    else
      log "[$i/${#levels[@]}] concurrency $level done in $((SECONDS - started))s"
    fi
  done
  ((DRY_RUN)) && return 0
  if command -v python3 >/dev/null 2>&1; then
    python3 -c "$BENCH_SUMMARY_PY" "$dir" "$DEPLOYMENT" "$SPEC_SHA256" "$image_id" "$input" "$output" "${levels[@]}" \
      || failed=1
  else
    warn "no python3 on $HEAD: the runs' JSON is in $dir, without a summary"
  fi
  log "results in $dir (sparkc bench-compare $dir OTHER compares it with another run)"
  return "$failed"
}

bench_usage_error() {
  echo "bench.sh: $*" >&2
  exit 2
}

# ARGV: the benchmark's `docker run` for one concurrency; the engine's words with their @...@ filled in.
bench_argv() {
  local level=$1 count=$2 input=$3 output=$4 dir=$5 snapshot=$6 word rest=()
  for word in "${BENCH_COMMAND[@]:1}"; do
    word=${word//@URL@/$PROBE_URL}
    word=${word//@MODEL@/$SERVED_MODEL}
    word=${word//@TOKENIZER@/$BENCH_TOKENIZER}
    word=${word//@INPUT@/$input}
    word=${word//@OUTPUT@/$output}
    word=${word//@PROMPTS@/$count}
    word=${word//@CONCURRENCY@/$level}
    word=${word//@RESULTS@/$BENCH_RESULTS}
    word=${word//@RESULT@/concurrency-$level.json}
    rest+=("$word")
  done
  ARGV=(docker run --rm --name "$BENCH_CONTAINER-$level" --network host --user "$(id -u):$(id -g)"
    -e HOME=/tmp
    -e OPENAI_API_KEY
    -v "$dir:$BENCH_RESULTS")
  for word in "${BENCH_MOUNTS[@]}"; do
    [[ -n $BENCH_SNAPSHOT_PLACEHOLDER && -n $snapshot ]] && word=${word//"$BENCH_SNAPSHOT_PLACEHOLDER"/$snapshot}
    ARGV+=("$word")
  done
  ARGV+=("${BENCH_ENV[@]}" --entrypoint "${BENCH_COMMAND[0]}" "$IMAGE" "${rest[@]}")
}
