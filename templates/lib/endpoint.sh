# The API's port and the URLs built on it. A launch may move the port (launch-cluster.sh --port); the
# scripts that talk to the endpoint afterwards follow the last launch's record.

# A port number as typed: 1 to 65535, digits only (leading zeros allowed, read as decimal).
valid_port() { [[ $1 =~ ^[0-9]{1,5}$ ]] && ((10#$1 >= 1 && 10#$1 <= 65535)); }

use_api_port() {
  API_PORT=$1
  PROBE_URL="http://$PROBE_URL_HOST:$1"
  ENDPOINT="http://$ENDPOINT_HOST:$1"
}

# The API's port of the last launch: the override.port line of last-launch.txt (read as data, never
# run; a line that is no port is ignored with a warning), else the compiled port.
last_launch_port() {
  local file=$SCRIPT_DIR/last-launch.txt line port=$COMPILED_API_PORT
  if [[ -f $file ]]; then
    while IFS= read -r line || [[ -n $line ]]; do
      [[ $line == override.port=* ]] || continue
      line=${line#override.port=}
      if valid_port "$line"; then
        port=$((10#$line))
      else
        warn "last-launch.txt: override.port is not a port number; using the compiled port $COMPILED_API_PORT"
      fi
    done <"$file"
  fi
  printf '%s\n' "$port"
}
