#!/usr/bin/env bats
# Words handed to a node's shell, and text from a node shown to the operator.

load helpers

setup() {
  load_runtime common.sh
}

@test "sh_quote gives a POSIX shell back the very words, hostile ones included" {
  local words=("a b" "it's" '$(touch /tmp/x)' '`id`' '*' $'two\nlines' '' '\' '"')
  local shells=(bash)
  command -v dash >/dev/null && shells+=(dash)
  for shell in "${shells[@]}"; do
    run "$shell" -c "for w in $(sh_quote "${words[@]}"); do printf '<%s>' \"\$w\"; done"
    [ "$status" -eq 0 ]
    [ "$output" = "$(printf '<%s>' "${words[@]}")" ]
  done
}

@test "dry_word leaves safe words bare and quotes the rest" {
  [ "$(dry_word NCCL_DEBUG=INFO)" = NCCL_DEBUG=INFO ]
  [ "$(dry_word /models/qwen3:ro)" = /models/qwen3:ro ]
  [ "$(dry_word 'a b')" = "'a b'" ]
  [ "$(dry_word "it's")" = "'it'\\''s'" ]
  [ "$(dry_word '$HOME')" = "'\$HOME'" ]
}

@test "printable turns control characters into ? and keeps tabs and newlines" {
  run printable $'red \e[31mtext\r\a'
  [ "$output" = 'red ?[31mtext??' ]
  run printable $'a\tb\nc'
  [ "$output" = $'a\tb\nc' ]
}

@test "printable catches C1 controls as UTF-8 writes them, and reads stdin without words" {
  run printable $'csi \xc2\x9b2J'
  [ "$output" = 'csi ?2J' ]
  run printable <<<$'from stdin \e]52;c;AAAA\a'
  [ "$output" = 'from stdin ?]52;c;AAAA?' ]
}

@test "printable keeps a non-control UTF-8 character" {
  run printable 'Grüße'
  [ "$output" = 'Grüße' ]
}

@test "safe_word keeps names and addresses and replaces anything else" {
  [ "$(safe_word 'spark-a.local:[fe80::1]/24')" = 'spark-a.local:[fe80::1]/24' ]
  [ "$(safe_word 'a b;$(x)')" = 'a?b???x?' ]
}

@test "has_control finds C0, DEL, C1 and the Unicode line separators" {
  has_control $'a\nb'
  has_control $'a\x7fb'
  has_control $'a\xc2\x85b'
  has_control $'a\xe2\x80\xa8b'
  run has_control 'plain value, with: punctuation=1'
  [ "$status" -ne 0 ]
}
