# The head's key authorized on a worker (sh -c SCRIPT sh KEY DRY-RUN), once: what ssh-copy-id does.
key=$1 dry=$2 file=$HOME/.ssh/authorized_keys
if [ -f "$file" ] && grep -qxF "$key" "$file"; then echo "the head key is already authorized"; exit 0; fi
if [ "$dry" = 1 ]; then echo "would add the head key to $file"; exit 0; fi
umask 077 && mkdir -p "$HOME/.ssh" && printf "%s\n" "$key" >>"$file" && echo "added the head key to $file"
