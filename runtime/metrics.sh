# status.sh's readings: the engine's own Prometheus metrics on the API port (requests running and waiting,
# the KV cache's share in use, prompt and generated tokens, and the token rates since the last call), and
# the last launch's timeline from last-launch.txt. Whatever the engine or the record holds is read as data:
# parsed by awk into numbers, never evaluated.

readonly SPARKC_METRICS_MAX_BYTES=4000000  # the most of /metrics read; a real engine's is well under 1 MB
readonly SPARKC_METRICS_STATE=status-metrics.txt  # beside the script: the previous sample, for the rates

# Prometheus text on stdin -> `KEY NUMBER` lines for the samples named by the SPARKC_METRICS_* constants:
# running, waiting, prompt, generation (each summed over its labels: one sample per data-parallel engine),
# kv (the mean of the first KV-cache name present) and engines (how many samples `running` had). A sample
# that is no plain finite number (NaN, +Inf, a word), a line over 4096 bytes, a name not asked for: skipped.
metrics_parse() {
  LC_ALL=C awk -v running="$SPARKC_METRICS_RUNNING" -v waiting="$SPARKC_METRICS_WAITING" \
    -v prompt="$SPARKC_METRICS_PROMPT_TOKENS" -v generation="$SPARKC_METRICS_GENERATION_TOKENS" \
    -v kvnames="${SPARKC_METRICS_KV_USAGE[*]}" '
    BEGIN {
      key[running] = "running"; key[waiting] = "waiting"; key[prompt] = "prompt"; key[generation] = "generation"
      kvcount = split(kvnames, kv, " ")
      for (i = 1; i <= kvcount; i++) key[kv[i]] = "kv" i
    }
    length($0) > 4096 || /^#/ { next }
    {
      if (!match($0, /^[A-Za-z_:][A-Za-z0-9_:]*/)) next
      name = substr($0, 1, RLENGTH)
      if (!(name in key)) next
      rest = substr($0, RLENGTH + 1)
      if (substr(rest, 1, 1) == "{") {
        gsub(/"([^"\\]|\\.)*"/, "\"\"", rest)  # label values may hold } and spaces
        end = index(rest, "}")
        if (!end) next
        rest = substr(rest, end + 1)
      }
      n = split(rest, field, /[ \t]+/)
      value = field[1] == "" ? field[2] : field[1]
      if (value !~ /^[-+]?([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][-+]?[0-9]+)?$/) next
      value += 0
      if (value < 0 || value >= 1e15) next
      sum[key[name]] += value
      seen[key[name]]++
    }
    END {
      split("running waiting prompt generation", order, " ")
      for (i = 1; i <= 4; i++) if (seen[order[i]]) printf "%s %.0f\n", order[i], sum[order[i]]
      if (seen["running"]) printf "engines %d\n", seen["running"]
      for (i = 1; i <= kvcount; i++) {
        if (seen["kv" i]) { printf "kv %.4f\n", sum["kv" i] / seen["kv" i]; break }
      }
    }'
}

# The engine's /metrics, at most SPARKC_METRICS_MAX_BYTES of it, parsed; fails where it does not answer.
# /metrics is outside /v1: no engine asks for the API key there.
metrics_fetch() {
  curl -fsS --max-time 5 --max-filesize "$SPARKC_METRICS_MAX_BYTES" "$SPARKC_PROBE_URL/metrics" 2>/dev/null \
    | head -c "$SPARKC_METRICS_MAX_BYTES" | metrics_parse
}

# The value of KEY in `KEY NUMBER` lines (the parser's, or the state file's), or nothing.
metrics_value() { # KEY LINES
  LC_ALL=C awk -v k="$1" '$1 == k && $2 ~ /^[0-9]+([.][0-9]+)?$/ { v = $2 } END { if (v != "") print v }' <<<"$2"
}

# The same, or ? where the engine did not report it.
metrics_shown() { # KEY LINES
  local value
  value=$(metrics_value "$1" "$2")
  printf '%s' "${value:-?}"
}

# Seconds since the epoch, to the microsecond where bash tells (EPOCHREALTIME; a comma in some locales).
metrics_now() {
  local now=${EPOCHREALTIME:-}
  [[ -n $now ]] || now=$(date +%s)
  printf '%s\n' "${now/,/.}"
}

# Tokens a second since the sample the last call kept: `seconds S`, `prompt_rate R`, `generation_rate R`
# lines; nothing (and the reason on stderr) where there is no earlier sample or it cannot count. Keeps this
# sample for the next call (written whole, then moved into place).
metrics_rates() { # PARSED
  local file=$SPARKC_SCRIPT_DIR/$SPARKC_METRICS_STATE now before="" out prompt generation
  now=$(metrics_now)
  prompt=$(metrics_value prompt "$1") generation=$(metrics_value generation "$1")
  [[ ! -f $file ]] || before=$(head -c 1000 -- "$file" | tr -d '\0')
  out=$(LC_ALL=C awk -v now="$now" -v p1="$prompt" -v g1="$generation" -v t0="$(metrics_value time "$before")" \
    -v p0="$(metrics_value prompt "$before")" -v g0="$(metrics_value generation "$before")" 'BEGIN {
      if (p1 == "" || g1 == "") { print "rate: the engine reports no token counters"; exit }
      if (t0 == "" || p0 == "" || g0 == "") { print "rate: from the next call on"; exit }
      dt = now - t0
      if (dt < 0.5) { print "rate: from the next call on (the last call was under half a second ago)"; exit }
      if (p1 < p0 || g1 < g0) { print "rate: from the next call on (the counters went back: the engine restarted)"; exit }
      printf "seconds %.1f\nprompt_rate %.1f\ngeneration_rate %.1f\n", dt, (p1 - p0) / dt, (g1 - g0) / dt
    }')
  if [[ -n $prompt && -n $generation ]] && own_path "$file" 2>/dev/null; then
    printf 'time %s\nprompt %s\ngeneration %s\n' "$now" "$prompt" "$generation" | save_file "$file" 2>/dev/null || true
  fi
  if [[ $out == rate:* ]]; then
    printf '%s\n' "${out#rate: }" >&2
    return 1
  fi
  printf '%s\n' "$out"
}

# last-launch.txt's timeline: `NAME START SECONDS` per phase, in the order they ran (only names of
# lower-case letters and digits, only whole numbers).
launch_phases() {
  local file=$SPARKC_SCRIPT_DIR/last-launch.txt
  [[ -f $file ]] || return 0
  LC_ALL=C awk 'length($0) < 200 && /^phase[.][a-z0-9-]+=[0-9]+ [0-9]+$/ {
    sub(/^phase[.]/, ""); sub(/=/, " "); print }' "$file"
}

# A number from last-launch.txt (ready_after, first_token), or nothing where the record has none.
launch_number() { # KEY
  local value
  value=$(last_launch_field "$1")
  [[ $value =~ ^[0-9]{1,9}([.][0-9]{1,6})?$ ]] && printf '%s\n' "$value"
  return 0
}

# A JSON string of printable ASCII: anything else becomes ?.
json_string() {
  local LC_ALL=C s=$1
  s=${s//[^ -~]/?}
  s=${s//\\/\\\\}
  printf '"%s"' "${s//\"/\\\"}"
}
