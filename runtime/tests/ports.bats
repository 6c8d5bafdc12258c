#!/usr/bin/env bats
# Port numbers as typed, the last launch's port, and whether a port is taken on the head.

load helpers

setup() {
  load_runtime common.sh endpoint.sh launch.sh
  SPARKC_HEAD_FABRIC_IP=192.168.100.10
  SPARKC_SCRIPT_DIR=$BATS_TEST_TMPDIR
  SPARKC_COMPILED_API_PORT=8000
}

# ss as `ss -Hltn "sport = :PORT"` prints it: the local address is the fourth column.
listening_on() { eval "ss() { printf 'LISTEN 0 4096 %s 0.0.0.0:*\n' $(printf '%q ' "$@"); }"; }

@test "valid_port takes 1 to 65535, digits only, leading zeros read as decimal" {
  valid_port 1
  valid_port 65535
  valid_port 08080
  for bad in 0 65536 99999 -1 80a '' ' 80' 123456; do
    run valid_port "$bad"
    [ "$status" -ne 0 ]
  done
}

@test "a listener on every address takes the port for any bind address" {
  listening_on 0.0.0.0:8000
  port_taken_at 192.168.100.10 8000
  listening_on '[::]:8000'
  port_taken_at 127.0.0.1 8000
}

@test "a listener on one address takes the port only for that address, or for a bind on every address" {
  listening_on 127.0.0.1:8000
  port_taken_at 127.0.0.1 8000
  port_taken_at 0.0.0.0 8000
  run port_taken_at 192.168.100.10 8000
  [ "$status" -ne 0 ]
  listening_on '[fe80::1%enp1s0]:8000'
  port_taken_at fe80::1 8000
}

@test "no listener: the port is free" {
  ss() { :; }
  run port_taken_at 0.0.0.0 8000
  [ "$status" -ne 0 ]
}

@test "the last launch's port is its override, read as data; a bad one falls back to the compiled port" {
  [ "$(last_launch_port)" = 8000 ]
  printf 'override.port=9000\noverride.port=09001\n' >"$SPARKC_SCRIPT_DIR/last-launch.txt"
  [ "$(last_launch_port)" = 9001 ]
  printf 'override.port=$(reboot)\n' >"$SPARKC_SCRIPT_DIR/last-launch.txt"
  run last_launch_port
  [ "${lines[-1]}" = 8000 ]
  [[ $output == *"override.port is not a port number"* ]]
}
