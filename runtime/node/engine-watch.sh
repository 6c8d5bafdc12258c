# The Ray engine's end, node side (sh -c SCRIPT sparkc-engine-watch CONTAINER): the line its wrapper writes in the log.
exec 3<&0
dir=$(mktemp -d) || exit 1
mkfifo "$dir/log" || { rm -rf "$dir"; exit 1; }
docker logs -f "$1" >"$dir/log" 2>&1 &
logs=$!
grep -m 1 "^sparkc: engine exited with status " <"$dir/log" &
found=$!
(read -r _ <&3; kill "$logs" "$found") </dev/null >/dev/null 2>&1 &
if ! wait "$found"; then
  wait "$logs"
  echo "docker logs -f ended with status $? before the engine did" >&2
fi
kill "$logs" 2>/dev/null
rm -rf "$dir"
