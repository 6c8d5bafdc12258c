# backend mpi: every container's main process (sh -c SCRIPT sparkc-mpi-sshd PORT ADDRESS [SECRET...]). It gives
# the container a key pair (the head's public key is installed in every container by the launcher), the
# client settings mpirun's ssh uses (PORT; host keys checked: the launcher records each container's key,
# made here at its start and read through the launcher's own checked ssh, in the head's known_hosts), writes
# the container's environment where sshd gives it to every rank mpirun starts here (its own netdev, RDMA
# devices and paths; secrets left out, mpirun passes them by -x), and runs sshd on ADDRESS:PORT.
port=$1
address=$2
shift 2
sshd=$(command -v sshd || echo /usr/sbin/sshd)
if [ ! -x "$sshd" ] || ! command -v ssh-keygen >/dev/null; then
  echo "sparkc: this image has no OpenSSH server ($sshd) or ssh-keygen: mpirun cannot start ranks in it" >&2
  exit 127
fi
mkdir -p /root/.ssh /run/sshd && chmod 700 /root/.ssh || exit 1
[ -f /root/.ssh/id_ed25519 ] || ssh-keygen -q -t ed25519 -N '' -C sparkc-mpi -f /root/.ssh/id_ed25519 || exit 1
[ -f /etc/ssh/sparkc_host_key ] || ssh-keygen -q -t ed25519 -N '' -f /etc/ssh/sparkc_host_key || exit 1
printf 'Host *\n  Port %s\n  BatchMode yes\n  StrictHostKeyChecking yes\n  LogLevel ERROR\n' "$port" >/root/.ssh/config
skip=" HOME HOSTNAME OLDPWD PWD SHLVL _ $* "
env | while IFS= read -r line; do
  name=${line%%=*}
  case $name in *[!A-Za-z0-9_]* | '' | [0-9]*) continue ;; esac
  case $skip in *" $name "*) continue ;; esac
  printf '%s\n' "$line"
done >/root/.ssh/environment
cat >/etc/ssh/sparkc_sshd_config <<CONFIG
Port $port
ListenAddress $address
HostKey /etc/ssh/sparkc_host_key
PidFile /run/sshd/sparkc.pid
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
AuthorizedKeysFile /root/.ssh/authorized_keys
PermitUserEnvironment yes
UsePAM no
StrictModes no
CONFIG
echo "sparkc: sshd for mpirun on $address:$port"
exec "$sshd" -D -e -f /etc/ssh/sparkc_sshd_config
