# The API's port and the URLs built on it. A launch may move the port (launch-cluster.sh --port); the
# scripts that talk to the endpoint afterwards follow the last launch's record.

# A port number as typed: 1 to 65535, digits only (leading zeros allowed, read as decimal).
valid_port() { [[ $1 =~ ^[0-9]{1,5}$ ]] && ((10#$1 >= 1 && 10#$1 <= 65535)); }

use_api_port() {
  SPARKC_API_PORT=$1
  SPARKC_PROBE_URL="http://$SPARKC_PROBE_URL_HOST:$1"
  SPARKC_ENDPOINT="http://$SPARKC_ENDPOINT_HOST:$1"
}

# A field of last-launch.txt (KEY=VALUE lines), read as data and never run; the last line for KEY
# counts; nothing when there is no record or no such line.
last_launch_field() { # KEY
  local file=$SPARKC_SCRIPT_DIR/last-launch.txt line value=""
  [[ -f $file ]] || return 0
  while IFS= read -r line || [[ -n $line ]]; do
    [[ $line == "$1="* ]] && value=${line#"$1="}
  done <"$file"
  printf '%s\n' "$value"
}

# The API's port of the last launch that started containers: its override.port (a value that is no
# port is ignored with a warning), else the compiled port.
last_launch_port() {
  local port
  port=$(last_launch_field override.port)
  if [[ -n $port ]] && ! valid_port "$port"; then
    warn "last-launch.txt: override.port is not a port number; using the compiled port $SPARKC_COMPILED_API_PORT"
    port=""
  fi
  printf '%s\n' "$((10#${port:-$SPARKC_COMPILED_API_PORT}))"
}
