#!/usr/bin/env bats
# Per-node lookups: which node runs here, and how a command reaches the others.

load helpers

setup() {
  load_runtime common.sh
  two_nodes
}

@test "the node with no ssh target is this host" {
  is_local spark-a
  run is_local spark-b
  [ "$status" -ne 0 ]
}

@test "on_node runs the head's commands here, with their output" {
  run on_node spark-a printf '%s|' one "two words"
  [ "$status" -eq 0 ]
  [ "$output" = "one|two words|" ]
}

@test "on_node reaches a worker through ssh with the deployment's options and target" {
  ssh() { printf '%s\n' "$@"; }
  run on_node spark-b docker ps
  [ "${lines[0]}" = -o ] && [ "${lines[1]}" = BatchMode=yes ]
  [ "${lines[2]}" = admin@spark-b.local ]
  [ "${lines[4]}" = "'docker' 'ps' " ]
}

@test "on_node gives back the remote command's exit status" {
  ssh() { return 7; }
  run on_node spark-b true
  [ "$status" -eq 7 ]
}

@test "container_state names a missing container as missing" {
  on_node() { echo "Error: No such object: ${SPARKC_CONTAINER[$1]}" >&2; return 1; }
  run container_state spark-b
  [ "$output" = missing ]
}

@test "container_state says docker is down rather than missing" {
  on_node() { echo "Cannot connect to the Docker daemon at unix:///var/run/docker.sock" >&2; return 1; }
  run container_state spark-b
  [[ $output == "UNKNOWN: docker is not running on spark-b"* ]]
}

@test "container_state reads a node's error bounded in size, on one line" {
  on_node() { printf 'boom\r\n%05000d' 0 >&2; return 1; }
  run container_state spark-b
  local head="UNKNOWN: docker did not answer on spark-b: "
  [[ $output == "$head"* ]]
  [ "${#output}" -eq $((${#head} + 200)) ]
  [[ $output != *$'\r'* && ${#lines[@]} -eq 1 ]]
}

@test "container_state prints docker's state as it is" {
  on_node() { echo running; }
  run container_state spark-a
  [ "$output" = running ]
}
