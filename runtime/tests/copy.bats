#!/usr/bin/env bats
# distribute.sh's copies without a cluster: pieces, routes, the relay that writes and passes frames on, the
# queue the streams take pieces from, and the programs that run on the nodes.

load helpers

setup() {
  load_runtime common.sh copy.sh distribute.sh
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

@test "the relay writes each frame meant for it, resumes a partial piece, and reads no byte past a frame" {
  local dir=$BATS_TEST_TMPDIR
  printf 'abXXXX' >"$dir/p.partial"  # two good bytes from an earlier run, then junk past the offset
  {
    printf '2 6 here %s\n' "$dir/p"
    printf 'cdef'
    printf '0 3 other,here %s/@NODE@-q\n' "$dir"
    printf 'xyz'
    printf '0 2 other %s/r\n' "$dir"  # for another node only: read past, written nowhere
    printf 'no'
  } | relay here 0 0 "$dir"
  [ "$(cat "$dir/p")" = abcdef ] && [ ! -e "$dir/p.partial" ]
  [ "$(cat "$dir/here-q")" = xyz ] && [ ! -e "$dir/r" ]
}

@test "the relay leaves a short piece partial and fails" {
  local dir=$BATS_TEST_TMPDIR
  run bash -c "$SPARKC_RELAY_PROGRAM" x here 0 0 "$dir" <<<"0 6 here $dir/q
abc"
  [ "$status" -ne 0 ] && [ -e "$dir/q.partial" ] && [ ! -e "$dir/q" ]
}

@test "the relay writes nothing outside its roots and stops at a header that does not parse" {
  local dir=$BATS_TEST_TMPDIR
  mkdir -p "$dir/root" "$dir/elsewhere"
  for header in "0 3 here $dir/elsewhere/x" "0 3 here $dir/root/../elsewhere/x" "0 x here $dir/root/x" \
    "4 3 here $dir/root/x" "0 3 here;rm $dir/root/x"; do
    run bash -c "$SPARKC_RELAY_PROGRAM" x here 0 0 "$dir/root" <<<"$header
abc"
    [ "$status" -ne 0 ] && [[ $output == *"does not parse"* ]]
  done
  [ -z "$(ls -A "$dir/elsewhere")" ] && [ -z "$(ls -A "$dir/root")" ]
}

@test "a node passes on only the frames meant for the nodes behind it" {
  here=b
  children=(c d)
  declare -A parent=([b]=a [c]=b [d]=b [e]=c)
  carries c e && carries c c && carries d b,d
  ! carries d c,e && ! carries c b
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

@test "the streams take every piece once, the image's first, and stop once the queue is closed and empty" {
  local dir=$BATS_TEST_TMPDIR
  queue_piece "$dir" queue.files f 0 0 10 n d1
  queue_piece "$dir" queue.files f 0 0 30 n d2
  publish_pieces "$dir" queue.files
  queue_piece "$dir" queue.image i 0 0 5 n d3
  publish_pieces "$dir" queue.image close
  run bash -c "$(declare -f take_piece); d=$dir"'; while i=$(take_piece "$d"); do echo "$i"; done'
  [ "$output" = $'2\n1\n0' ]  # the image's, then the folders' largest first
}

@test "a node's folder survey: each line's state, then its files" {
  local dir=$BATS_TEST_TMPDIR
  mkdir -p "$dir/m/sub"
  printf 'hello' >"$dir/m/a"
  printf 'x' >"$dir/m/sub/extra"
  run bash -c "$SPARKC_NODE_PROGRAM" x folder_survey ends "$dir/m" <<<"5 - $dir/m/a
3 - $dir/m/b"
  [ "$status" -eq 0 ]
  [ "$(sed -n 1,3p <<<"$output")" = $'have\n0\n--' ]
  [ "$(sed -n '4,$p' <<<"$output" | sort)" = $'a\nsub/extra' ]
}

@test "a node's folder finish joins the pieces, checks the files, and then removes what the head lacks" {
  local dir=$BATS_TEST_TMPDIR
  mkdir -p "$dir/m"
  printf 'hel' >"$dir/m/a.sparkc-piece-0"
  printf 'lo' >"$dir/m/a.sparkc-piece-3"
  printf 'old' >"$dir/m/a.sparkc-piece-9"  # left by a run that cut otherwise
  printf 'x' >"$dir/m/extra"
  run bash -c "$SPARKC_NODE_PROGRAM" x folder_finish ends "$dir/m" <<<"0,3 $dir/m/a
--
5 - $dir/m/a
--
extra"
  [ "$output" = have ] && [ "$(cat "$dir/m/a")" = hello ]
  [ "$(ls "$dir/m")" = a ]
}

@test "a node's folder finish keeps everything where a file is not whole" {
  local dir=$BATS_TEST_TMPDIR
  mkdir -p "$dir/m"
  printf 'hel' >"$dir/m/a.sparkc-piece-0"
  printf 'x' >"$dir/m/extra"
  run bash -c "$SPARKC_NODE_PROGRAM" x folder_finish ends "$dir/m" <<<"0,3 $dir/m/a
--
5 - $dir/m/a
--
extra"
  [ "$output" = 0 ] && [ -e "$dir/m/extra" ] && [ -e "$dir/m/a.sparkc-piece-0" ]
}

@test "a node's loader waits for each piece in order and gives up on a missing one once the head is done" {
  local dir=$BATS_TEST_TMPDIR
  printf 'ab' >"$dir/0"
  eval "docker() { cat >'$dir/loaded'; }"
  export -f docker
  (sleep 1 && printf 'cd' >"$dir/2") &
  run bash -c "$SPARKC_NODE_PROGRAM" x load_pieces "$dir/0" "$dir/2" < <(sleep 3)
  [ "$status" -eq 0 ] && [ "$(cat "$dir/loaded")" = abcd ]
  run bash -c "$SPARKC_NODE_PROGRAM" x load_pieces "$dir/0" "$dir/missing" </dev/null
  [ "$status" -ne 0 ] && [[ $output == *"did not arrive"* ]]
}
