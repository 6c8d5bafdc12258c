# A container's death, node side (sh -c SCRIPT sparkc-watch SINCE ID): docker events until stdin closes.
exec 3<&0
docker events --since "$1" --filter "container=$2" --filter event=die --format "{{.Action}} {{.Actor.Attributes.exitCode}}" &
pid=$!
(read -r _ <&3; kill "$pid") </dev/null >/dev/null 2>&1 &
wait "$pid"
