"""Which ssh -o options a spec may pass: only known ones, each with a value of the expected shape.

Some ssh options make ssh run a program on the head (ProxyCommand, LocalCommand, KnownHostsCommand,
Match exec, a PKCS#11 library, ...): a spec that reached them would run code wherever the launcher
runs. A list of what is allowed, not of what is refused, keeps the next such option out too.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator

from compiler.diagnostics import Diagnostic, error
from compiler.resolve.context import Deployment

_YES_NO = r"yes|no"
_NUMBER = r"[0-9]{1,6}"
_PATH = r"[A-Za-z0-9_./~%+-]+"
_HOST = r"[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?"
_JUMP = rf"(?:[a-z_][a-z0-9_.-]*@)?{_HOST}(?::{_NUMBER})?"
_ALGORITHMS = r"[-+^]?[A-Za-z0-9@._+-]+(?:,[A-Za-z0-9@._+-]+)*"

# Option (as ssh_config(5) spells it) -> the values sparkc lets through.
ALLOWED = {
    "AddressFamily": r"any|inet|inet6",
    "BatchMode": _YES_NO,
    "CertificateFile": _PATH,
    "CheckHostIP": _YES_NO,
    "Ciphers": _ALGORITHMS,
    "Compression": _YES_NO,
    "ConnectionAttempts": _NUMBER,
    "ConnectTimeout": _NUMBER,
    "ControlMaster": r"yes|no|auto|ask|autoask",
    "ControlPath": _PATH,
    "ControlPersist": rf"yes|no|{_NUMBER}[smhdw]?",
    "GlobalKnownHostsFile": _PATH,
    "HashKnownHosts": _YES_NO,
    "HostKeyAlgorithms": _ALGORITHMS,
    "HostKeyAlias": r"[A-Za-z0-9._-]+",
    "IdentitiesOnly": _YES_NO,
    "IdentityFile": _PATH,
    "IPQoS": r"[a-z0-9]+(?:,[a-z0-9]+)?",
    "KexAlgorithms": _ALGORITHMS,
    "LogLevel": r"QUIET|FATAL|ERROR|INFO|VERBOSE|DEBUG[123]?",
    "MACs": _ALGORITHMS,
    "NumberOfPasswordPrompts": _NUMBER,
    "PasswordAuthentication": _YES_NO,
    "PreferredAuthentications": r"[a-z-]+(?:,[a-z-]+)*",
    "ProxyJump": rf"none|{_JUMP}(?:,{_JUMP})*",
    "PubkeyAcceptedAlgorithms": _ALGORITHMS,
    "PubkeyAcceptedKeyTypes": _ALGORITHMS,
    "PubkeyAuthentication": _YES_NO,
    "ServerAliveCountMax": _NUMBER,
    "ServerAliveInterval": _NUMBER,
    "StrictHostKeyChecking": r"yes|no|ask|off|accept-new",
    "TCPKeepAlive": _YES_NO,
    "UpdateHostKeys": r"yes|no|ask",
    "UserKnownHostsFile": _PATH,
}
_BY_LOWER = {name.lower(): name for name in ALLOWED}
# Options that run a program on the machine ssh starts from: named in the message, never allowed.
RUNS_PROGRAMS = {
    "proxycommand", "localcommand", "permitlocalcommand", "knownhostscommand", "remotecommand",
    "pkcs11provider", "securitykeyprovider", "match", "include", "proxyusefdpass", "identityagent",
}  # fmt: skip


def ssh_options(d: Deployment) -> Iterator[Diagnostic]:
    ssh = d.spec.cluster.ssh
    for i, option in enumerate(ssh.options):
        name, _, value = option.partition("=")
        known = _BY_LOWER.get(name.lower())
        path = ssh.at("options", i)
        if name.lower() in RUNS_PROGRAMS:
            yield error(path, f"{name} can make ssh run a program where the launcher runs; sparkc does not pass it")
        elif known is None:
            yield error(path, f"ssh option {name} is not one sparkc passes; allowed: {', '.join(sorted(ALLOWED))}")
        elif not re.fullmatch(ALLOWED[known], value):
            yield error(path, f"{value!r} is not a value sparkc passes for {known} (expected {ALLOWED[known]})")


def ssh_hosts(d: Deployment) -> Iterator[Diagnostic]:
    """A node's ssh address is a host name or an IP address: OpenSSH takes the port from -p (cluster.ssh.port),
    and `ssh spark-b:22` looks up a host named "spark-b:22"."""
    for node in d.spec.cluster.nodes:
        host = node.ssh
        if host is None or ":" not in host:
            continue
        name, _, port = host.rpartition(":")
        if host.count(":") == 1:
            fix = f"write ssh: {name}" + (f" and the port as cluster.ssh.port: {port}" if port.isdigit() else "")
            yield error(
                node.at("ssh"),
                f"'{host}' puts a port in the host: ssh would look for a host named so; {fix} (a port that differs "
                "per node goes in the head's ~/.ssh/config, under that node's Host)",
            )
        elif not _ipv6(host):
            yield error(node.at("ssh"), f"'{host}' is not an IPv6 address nor a host name: write the node's address")


def _ipv6(text: str) -> bool:
    try:
        return ipaddress.ip_address(text).version == 6
    except ValueError:
        return False


RULES = (ssh_options, ssh_hosts)
