bench_usage() {
  cat <<USAGE
Usage: bench.sh [--concurrency LIST] [--input-len N] [--output-len N] [--prompts N] [--timeout SECONDS]
                [--out DIR] [--dry-run]

Runs the engine's own serving benchmark (${SPARKC_BENCH_COMMAND[*]:0:3} ...) in the deployment's image on this
node, the head, against the live endpoint, once per concurrency (default $SPARKC_BENCH_CONCURRENCIES), with random
prompts of --input-len tokens (default $SPARKC_BENCH_INPUT_LEN) asking for --output-len (default $SPARKC_BENCH_OUTPUT_LEN),
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
# sparkc-embed SPARKC_BENCH_SUMMARY_PY bench_summary.py
bench_main() {
  local list=$SPARKC_BENCH_CONCURRENCIES input=$SPARKC_BENCH_INPUT_LEN output=$SPARKC_BENCH_OUTPUT_LEN prompts="" limit=600 dir=""
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
      --dry-run) SPARKC_DRY_RUN=1 ;;
      -h | --help) bench_usage; exit 0 ;;
      *) bench_usage_error "unknown option: $1 (see --help)" ;;
    esac
    shift
  done
  use_api_port "$(last_launch_port)"
  local key=""
  if [[ -n $SPARKC_API_KEY_VAR ]]; then
    key=${!SPARKC_API_KEY_VAR:-}
    [[ -n $key ]] || bench_usage_error "the endpoint needs its API key: export $SPARKC_API_KEY_VAR where bench.sh runs"
  elif [[ -n $SPARKC_API_KEY_GIVEN ]]; then
    key=$SPARKC_API_KEY_GIVEN
  fi
  local snapshot="" image_id="" level i=0 count failed=0 levels=() new fd stamp problem
  stamp=$(date -u +%Y%m%dT%H%M%SZ)
  IFS=, read -r -a levels <<<"$list"
  log "benchmark of $SPARKC_DEPLOYMENT at $SPARKC_PROBE_URL: concurrency ${levels[*]}, $input tokens in, $output out"
  if ! dry_run; then
    if [[ -z $dir ]]; then
      new_folder "$SPARKC_SCRIPT_DIR/bench" "$stamp" || exit 1
      dir=$SPARKC_NEW_FOLDER
    fi
    own_path "$dir" folder && mkdir -p -- "$dir" || exit 1
    image_id=$(docker image inspect --format '{{.Id}}' "$SPARKC_IMAGE") || { warn "no image $SPARKC_IMAGE on $SPARKC_HEAD"; exit 1; }
    if [[ -n $SPARKC_BENCH_SNAPSHOT_REF ]]; then
      snapshot=$(cat -- "$SPARKC_BENCH_SNAPSHOT_REF") || { warn "cannot read $SPARKC_BENCH_SNAPSHOT_REF"; exit 1; }
    fi
  fi
  [[ -n $dir ]] || dir=$SPARKC_SCRIPT_DIR/bench/$stamp  # what a dry run shows
  # container.mounts under ~/: the benchmark runs here, on the head, so ~/ is this user's home.
  if [[ -n $SPARKC_HOME_PLACEHOLDER ]]; then
    if dry_run; then
      SPARKC_HOME_AT[$SPARKC_HEAD]="<home of the ssh user on $SPARKC_HEAD>"
    else
      SPARKC_HOME_AT[$SPARKC_HEAD]=$(cd && pwd) || exit 1
      problem=$(home_problem "${SPARKC_HOME_AT[$SPARKC_HEAD]}")
      [[ -z $problem ]] || { warn "$SPARKC_HEAD answered $(printable "$problem")"; exit 1; }
    fi
  fi
  for level in "${levels[@]}"; do
    i=$((i + 1))
    count=${prompts:-$((level * 4 > 8 ? level * 4 : 8))}
    bench_argv "$level" "$count" "$input" "$output" "$dir" "$snapshot"
    if dry_run; then
      dry_print "$SPARKC_HEAD" "${SPARKC_ARGV[@]}"
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
      exec timeout --kill-after=10 "$limit" "${SPARKC_ARGV[@]}"
    ) >&"$fd" 2>&1 </dev/null || status=$?
    exec {fd}>&-
    if ((status == 124 || status == 137)); then
      docker rm -f "$SPARKC_BENCH_CONTAINER-$level" >/dev/null 2>&1 || true
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
  dry_run && return 0
  if command -v python3 >/dev/null 2>&1; then
    python3 -c "$SPARKC_BENCH_SUMMARY_PY" "$dir" "$SPARKC_DEPLOYMENT" "$SPARKC_SPEC_SHA256" "$image_id" "$input" "$output" "${levels[@]}" \
      || failed=1
  else
    warn "no python3 on $SPARKC_HEAD: the runs' JSON is in $dir, without a summary"
  fi
  log "results in $dir (sparkc bench-compare $dir OTHER compares it with another run)"
  return "$failed"
}

bench_usage_error() {
  echo "bench.sh: $*" >&2
  exit 2
}

# SPARKC_ARGV: the benchmark's `docker run` for one concurrency; the engine's words with their @...@ filled in.
bench_argv() {
  local level=$1 count=$2 input=$3 output=$4 dir=$5 snapshot=$6 word rest=()
  for word in "${SPARKC_BENCH_COMMAND[@]:1}"; do
    word=${word//@URL@/$SPARKC_PROBE_URL}
    word=${word//@MODEL@/$SPARKC_SERVED_MODEL}
    word=${word//@TOKENIZER@/$SPARKC_BENCH_TOKENIZER}
    word=${word//@INPUT@/$input}
    word=${word//@OUTPUT@/$output}
    word=${word//@PROMPTS@/$count}
    word=${word//@CONCURRENCY@/$level}
    word=${word//@RESULTS@/$SPARKC_BENCH_RESULTS}
    word=${word//@RESULT@/concurrency-$level.json}
    rest+=("$word")
  done
  SPARKC_ARGV=(docker run --rm --name "$SPARKC_BENCH_CONTAINER-$level" --network host --user "$(id -u):$(id -g)"
    -e HOME=/tmp
    -e OPENAI_API_KEY
    -v "$dir:$SPARKC_BENCH_RESULTS")
  for word in "${SPARKC_BENCH_MOUNTS[@]}"; do
    [[ -n $SPARKC_BENCH_SNAPSHOT_PLACEHOLDER && -n $snapshot ]] && word=${word//"$SPARKC_BENCH_SNAPSHOT_PLACEHOLDER"/$snapshot}
    # A mount under ~/: this node's home (the head's, where the benchmark runs), as the launch put it there.
    [[ -n $SPARKC_HOME_PLACEHOLDER && $word == "$SPARKC_HOME_PLACEHOLDER/"* ]] && word=${SPARKC_HOME_AT[$SPARKC_HEAD]}${word#"$SPARKC_HOME_PLACEHOLDER"}
    SPARKC_ARGV+=("$word")
  done
  SPARKC_ARGV+=("${SPARKC_BENCH_ENV[@]}" --entrypoint "${SPARKC_BENCH_COMMAND[0]}" "$SPARKC_IMAGE" "${rest[@]}")
}
