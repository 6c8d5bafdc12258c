#!/usr/bin/env bats
# distribute.sh's copies without a cluster: pieces, routes, and the relay that writes and passes them on.

load helpers

setup() {
  load_runtime common.sh copy.sh
  two_nodes
}

@test "a size is cut into pieces that cover it, none more than one byte longer than another" {
  run cut_pieces 10 3
  [ "$output" = $'0 3\n3 3\n6 4' ]
  run cut_pieces 5 1
  [ "$output" = "0 5" ]
}

@test "a node's path to the head, nearest first, follows the routes" {
  SPARKC_HEAD=a
  declare -gA SPARKC_ROUTE_FROM=([b]=a [c]=b [d]=a)
  run route_path c
  [ "$output" = $'c\nb' ]
}

@test "the relay appends from the offset, renames the piece once whole, and resumes a partial one" {
  local dir=$BATS_TEST_TMPDIR
  printf 'abXXXX' >"$dir/p.partial"  # two good bytes from an earlier run, then junk past the offset
  printf 'cdef' | relay here "$dir/p" 2 6 0 0 'here|head|x|k|1|'
  [ "$(cat "$dir/p")" = abcdef ] && [ ! -e "$dir/p.partial" ]
}

@test "the relay leaves a short piece partial and fails" {
  local dir=$BATS_TEST_TMPDIR
  run bash -c "$SPARKC_RELAY_PROGRAM" x here "$dir/q" 0 6 0 0 'here|head|x|k|1|' <<<"abc"
  [ "$status" -ne 0 ] && [ -e "$dir/q.partial" ] && [ ! -e "$dir/q" ]
}

@test "piece states: whole, partial, missing; a whole file with another checksum is not whole" {
  local dir=$BATS_TEST_TMPDIR
  printf 'hello' >"$dir/a"
  printf 'hel' >"$dir/b.partial"
  local sum
  sum=$(file_sum ends "$dir/a")
  run piece_states ends <<<"5 $sum $dir/a
5 - $dir/b
5 - $dir/c
5 0000 $dir/a"
  [ "$output" = $'have\n3\n0\n0' ]
}
