"""Which ssh -o options a spec may pass: a few, each with a value from a fixed set or a bounded number.

A spec is often someone else's file, and ssh runs on the head as the operator. Options that run a program
(ProxyCommand, LocalCommand, KnownHostsCommand, Match exec, ...) would run code there; options that name a
file, an alias or turn host-key checking down combine into a key planted where sshd reads it
(UserKnownHostsFile=/root/.ssh/authorized_keys, StrictHostKeyChecking=accept-new, HashKnownHosts=no,
HostKeyAlias=restrict append each node's host key to root's authorized keys). So the list says what is
allowed, never what is refused, and no allowed value can name a file or a command. The rest belongs in
the operator's own ~/.ssh/config, which ssh reads on the head as well.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator

from compiler.diagnostics import Diagnostic, error
from compiler.resolve.context import Deployment

_CIPHER = r"(?:aes(?:128|192|256)-ctr|aes(?:128|256)-gcm@openssh\.com|chacha20-poly1305@openssh\.com)"
_HOST = r"[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?"
_JUMP = rf"(?:[a-z_][a-z0-9_.-]*@)?{_HOST}(?::[1-9][0-9]{{0,4}})?"
_IPQOS = r"af[1-4][1-3]|cs[0-7]|ef|le|lowdelay|throughput|reliability|none"

# Option (as ssh_config(5) spells it) -> the values sparkc lets through (a regular expression, whole value).
ALLOWED = {
    "AddressFamily": r"any|inet|inet6",
    "BatchMode": r"yes",
    "Ciphers": rf"{_CIPHER}(?:,{_CIPHER}){{0,5}}",
    "Compression": r"yes|no",
    "ConnectionAttempts": r"[1-9]|10",
    "ControlMaster": r"no",  # turns off the launcher's shared connection; a master of one's own: ~/.ssh/config
    "IdentitiesOnly": r"yes|no",
    "IPQoS": _IPQOS,
    "LogLevel": r"QUIET|FATAL|ERROR|INFO",  # more would mix debug lines into the nodes' answers
    "ProxyJump": rf"none|{_JUMP}(?:,{_JUMP}){{0,3}}",
    "ServerAliveCountMax": r"[1-9][0-9]?|100",
    "ServerAliveInterval": r"[1-9][0-9]{0,2}|[1-2][0-9]{3}|3[0-5][0-9]{2}|3600",
    "StrictHostKeyChecking": r"yes",
    "TCPKeepAlive": r"yes|no",
}
_BY_LOWER = {name.lower(): name for name in ALLOWED}
_EXPECTED = {
    "Ciphers": "a comma-separated list of aes128-ctr, aes192-ctr, aes256-ctr, aes128-gcm@openssh.com, "
    "aes256-gcm@openssh.com, chacha20-poly1305@openssh.com",
    "ConnectionAttempts": "a number from 1 to 10",
    "IPQoS": "one of af11..af43, cs0..cs7, ef, le, lowdelay, throughput, reliability, none",
    "ProxyJump": "none, or [USER@]HOST[:PORT], up to 4 separated by commas",
    "ServerAliveCountMax": "a number from 1 to 100",
    "ServerAliveInterval": "a number of seconds from 1 to 3600",
}
# Options that make ssh run a program on the machine it starts from: never allowed.
RUNS_PROGRAMS = {
    "proxycommand", "localcommand", "permitlocalcommand", "knownhostscommand", "remotecommand",
    "pkcs11provider", "securitykeyprovider", "match", "include", "proxyusefdpass", "identityagent",
}  # fmt: skip
# Options the spec has a field of its own for: ssh keeps the first value it is given, and sparkc passes the
# field's value before the options, so the option would be ignored.
FIELDS = {"identityfile": "identity_file", "connecttimeout": "connect_timeout", "port": "port", "user": "user"}
_CONFIG_FIX = "write it in ~/.ssh/config on the head, under a Host line for the nodes"


def option_problem(option: str) -> str:
    """Why sparkc does not pass one ssh option (KEY=VALUE), with what to write instead; '' when it does."""
    name, _, value = option.partition("=")
    lower = name.lower()
    known = _BY_LOWER.get(lower)
    if lower in RUNS_PROGRAMS:
        return f"{name} can make ssh run a program where the launcher runs; sparkc does not pass it"
    if lower in FIELDS:
        return f"{name} is not one sparkc passes as an option: write cluster.ssh.{FIELDS[lower]} instead"
    if known is None:
        return (
            f"ssh option {name} is not one sparkc passes (options that name a file, a command or an alias, or "
            f"that turn host-key checking down, are not); {_CONFIG_FIX}. Allowed: {', '.join(sorted(ALLOWED))}"
        )
    if re.fullmatch(ALLOWED[known], value):
        return ""
    expected = _EXPECTED.get(known, " or ".join(ALLOWED[known].split("|")))
    fix = f"; {_CONFIG_FIX}" if known in ("StrictHostKeyChecking", "ControlMaster") else ""
    return f"{value!r} is not a value sparkc passes for {known} (expected {expected}){fix}"


def ssh_options(d: Deployment) -> Iterator[Diagnostic]:
    ssh = d.spec.cluster.ssh
    for i, option in enumerate(ssh.options):
        problem = option_problem(option)
        if problem:
            yield error(ssh.at("options", i), problem)


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
