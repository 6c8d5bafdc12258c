# The head's public ssh key (sh -c SCRIPT sh KEY-PATH DRY-RUN, on the head): printed, made first when there
# is none (ed25519, no passphrase), or in a dry run "no-key PATH" when it would be made.
k=${1:-$HOME/.ssh/id_ed25519}
if [ -f "$k.pub" ]; then cat "$k.pub"; exit 0; fi
if [ "$2" = 1 ]; then echo "no-key $k"; exit 0; fi
mkdir -p "${k%/*}" && ssh-keygen -q -t ed25519 -N "" -C "sparkc head" -f "$k" >&2 && cat "$k.pub"
