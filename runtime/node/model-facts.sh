# The weights' facts, node side (sh -c SCRIPT sh FOLDER REVISION HF): the snapshot, its ref, dangling links.
# The folder is data: what its files say is read a bounded number of bytes at a time, passed on only as a
# commit (hex) or a ref name of safe characters, and never becomes part of a program or a path out.
folder=$1 rev=$2 hf=$3
# $1 if it is a commit id (hex, at most 64 digits), else nothing.
facts_commit() {
  case $1 in "" | *[!0123456789abcdef]*) return 0 ;; esac
  [ "${#1}" -gt 64 ] || printf '%s' "$1"
}
# Whether $1 is a ref git would write: refs/..., safe characters, no component starting with '.', no '//'.
facts_ref_ok() {
  [ "${#1}" -le 200 ] || return 1
  case $1 in
    *[!abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._/-]* | */.* | *//* | */ | *.lock) return 1 ;;
    refs/?*) return 0 ;;
  esac
  return 1
}
# The first bytes of a regular file (no FIFO, no device: they could block or never end).
facts_read() { if [ -f "$1" ]; then head -c "$2" "$1" 2>/dev/null; fi; }
if [ -n "$hf" ]; then
  commit=$rev
  if [ "$hf" = ref ]; then
    commit=$(facts_commit "$(facts_read "$folder/refs/$rev" 100)")
    [ -n "$commit" ] || { echo "noref $folder/refs/$rev"; exit 0; }
  fi
  echo "snapshot $commit"
  folder=$folder/snapshots/$commit
elif [ "$(basename "$(dirname "$folder")")" = snapshots ]; then
  echo "snapshot $(basename "$folder")"
  repo=$(dirname "$(dirname "$folder")")
  if [ -n "$rev" ]; then
    commit=$(facts_commit "$(facts_read "$repo/refs/$rev" 100)")
    [ -z "$commit" ] || echo "ref $commit"
  fi
elif [ -f "$folder/.git/HEAD" ]; then
  head=$(facts_read "$folder/.git/HEAD" 256)
  case $head in
    "ref: "*)
      ref=${head#ref: }
      if facts_ref_ok "$ref"; then
        commit=$(facts_read "$folder/.git/$ref" 100)
        if [ -z "$commit" ]; then
          # packed-refs: "COMMIT REF" lines; the ref is compared as data (awk reads it from the environment).
          commit=$(facts_read "$folder/.git/packed-refs" 4194304 | ref=$ref awk '$2 == ENVIRON["ref"] { print $1; exit }')
        fi
        commit=$(facts_commit "$commit")
        echo "git ${commit:-unknown} ${ref#refs/heads/}"
      fi
      ;;
    *)
      commit=$(facts_commit "$head")
      [ -z "$commit" ] || echo "git $commit"
      ;;
  esac
fi
[ -d "$folder" ] || { echo "missing $folder"; exit 0; }
# Links into nothing, at most 5; a walk longer than 10 s is cut and says so. Links are not followed.
{
  timeout 10 find "$folder" -type l ! -exec test -e {} \; -print 2>/dev/null
  case $? in 124 | 143) echo sparkc-walk-cut ;; esac # timed out (GNU timeout: 124; busybox: TERM)
} | awk '$0 == "sparkc-walk-cut" { print "cut"; exit } { print "dangling " $0 } NR == 5 { exit }'
