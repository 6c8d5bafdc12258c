# The weights' facts, node side (sh -c SCRIPT sh FOLDER REVISION HF): the snapshot, its ref, dangling links.
folder=$1 rev=$2 hf=$3
if [ -n "$hf" ]; then
  commit=$rev
  if [ "$hf" = ref ]; then
    [ -f "$folder/refs/$rev" ] || { echo "noref $folder/refs/$rev"; exit 0; }
    commit=$(cat "$folder/refs/$rev")
  fi
  echo "snapshot $commit"
  folder=$folder/snapshots/$commit
elif [ "$(basename "$(dirname "$folder")")" = snapshots ]; then
  echo "snapshot $(basename "$folder")"
  repo=$(dirname "$(dirname "$folder")")
  if [ -n "$rev" ] && [ -f "$repo/refs/$rev" ]; then echo "ref $(cat "$repo/refs/$rev")"; fi
elif [ -f "$folder/.git/HEAD" ]; then
  head=$(cat "$folder/.git/HEAD")
  case $head in
    "ref: "*)
      ref=${head#ref: }
      commit=$(cat "$folder/.git/$ref" 2>/dev/null || sed -n "s| $ref\$||p" "$folder/.git/packed-refs" 2>/dev/null)
      echo "git $commit ${ref#refs/heads/}" ;;
    *) echo "git $head" ;;
  esac
fi
[ -d "$folder" ] || { echo "missing $folder"; exit 0; }
find "$folder" -type l ! -exec test -e {} \; -print 2>/dev/null | head -n 5 | sed "s/^/dangling /"
