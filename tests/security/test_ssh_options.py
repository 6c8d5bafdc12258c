"""cluster.ssh.options: a spec may pass ssh only options that cannot name a file, a command or an alias,
nor turn host-key checking down. Four options that each looked harmless planted a key where sshd reads
it: ssh appended each node's host key, as `restrict ssh-ed25519 AAAA...`, to root's authorized_keys.
Checked against the real OpenSSH client's own reading of its options (`ssh -G`)."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from compiler.resolve.rules.ssh import ALLOWED
from tests.product import needs
from tests.specs import compile_spec, dump, example, with_changes

pytestmark = pytest.mark.security

NATIVE = "llama33-70b-2spark-native"
PLANTED_KEY = [
    "UserKnownHostsFile=/root/.ssh/authorized_keys",
    "StrictHostKeyChecking=accept-new",
    "HashKnownHosts=no",
    "HostKeyAlias=restrict",
]
# What ssh reads a file, a program or a host's identity from, or how much it trusts a host key.
TRUST = (
    "userknownhostsfile", "globalknownhostsfile", "identityfile", "certificatefile", "controlpath",
    "hostkeyalias", "stricthostkeychecking", "hashknownhosts", "updatehostkeys", "checkhostip",
    "hostkeyalgorithms", "proxycommand", "localcommand", "permitlocalcommand", "knownhostscommand",
    "pkcs11provider", "securitykeyprovider", "identityagent", "revokedhostkeys", "verifyhostkeydns",
)  # fmt: skip

# Settings ssh derives from another: BatchMode=yes turns on a 300 s keep-alive where none is set.
IMPLIED = {"BatchMode": ("serveraliveinterval",)}


def ssh_config(*options: str) -> dict[str, str]:
    """ssh's effective settings for a host, as the real client reads `-o` options (first value wins)."""
    needs(shutil.which("ssh") is None, "needs the OpenSSH client")
    argv = ["ssh", "-F", "/dev/null", "-G"]
    for option in options:
        argv += ["-o", option]
    out = subprocess.run([*argv, "spark-b"], capture_output=True, text=True, timeout=10, check=True).stdout
    settings: dict[str, str] = {}
    for line in out.splitlines():
        key, _, value = line.partition(" ")
        settings[key] = f"{settings[key]}\n{value}" if key in settings else value
    return settings


def samples(pattern: str) -> list[str]:
    """A few values the allow-list takes for an option: each alternative of a list of words, else examples."""
    if re.fullmatch(r"[A-Za-z0-9-]+(\|[A-Za-z0-9-]+)*", pattern):
        return pattern.split("|")
    examples = ["1", "10", "60", "3600", "aes128-gcm@openssh.com,chacha20-poly1305@openssh.com", "cs1", "af21",
                "me@bastion:2222", "jump-1,jump-2"]  # fmt: skip
    return [e for e in examples if re.fullmatch(pattern, e)]


def test_the_options_that_planted_a_login_key_are_each_refused_at_their_line() -> None:
    text = dump(with_changes(example(NATIVE), {"cluster.ssh.options": PLANTED_KEY}))
    result = compile_spec(text, render_files=False)
    errors = {d.path: d for d in result.diagnostics if d.severity == "error"}
    lines = text.splitlines()
    for i, option in enumerate(PLANTED_KEY):
        d = errors[("cluster", "ssh", "options", i)]
        assert option in lines[d.line - 1] and d.column == lines[d.line - 1].index(option.split("=")[0]) + 1
        assert "~/.ssh/config" in d.message, d.message
    assert len(errors) == len(PLANTED_KEY)


@pytest.mark.parametrize(
    ("option", "field"),
    [("IdentityFile=/home/aurora/.ssh/id", "identity_file"), ("ConnectTimeout=5", "connect_timeout"),
     ("Port=2222", "port"), ("User=aurora", "user")],
)  # fmt: skip
def test_options_the_spec_has_a_field_for_point_to_it(option: str, field: str) -> None:
    result = compile_spec(with_changes(example(NATIVE), {"cluster.ssh.options": [option]}), render_files=False)
    (message,) = [d.message for d in result.diagnostics if d.severity == "error"]
    assert f"cluster.ssh.{field}" in message


@pytest.mark.parametrize("name", sorted(ALLOWED))
def test_every_allowed_value_changes_only_its_own_setting_and_no_file_or_trust(name: str) -> None:
    baseline = ssh_config()
    values = samples(ALLOWED[name])
    assert values, f"no sample value for {name}"
    for value in values:
        option = f"{name}={value}"
        result = compile_spec(with_changes(example(NATIVE), {"cluster.ssh.options": [option]}), render_files=False)
        assert result.ok, [d.message for d in result.diagnostics]
        settings = ssh_config(option)
        changed = {k for k, v in settings.items() if baseline.get(k) != v}
        assert changed <= {name.lower(), *IMPLIED.get(name, ())}, f"{option} changed {changed}"
        # no file, program or alias; host-key checking only made stricter (ssh -G prints yes as true)
        assert {k: settings[k] for k in changed & set(TRUST)} in ({}, {"stricthostkeychecking": "true"})


def test_the_planted_key_options_change_files_and_trust_in_real_ssh() -> None:
    """The other side of the test above: what it looks for is what the attack changed."""
    baseline, attacked = ssh_config(), ssh_config(*PLANTED_KEY)
    changed = {k for k, v in attacked.items() if baseline.get(k) != v}
    assert {"userknownhostsfile", "stricthostkeychecking", "hostkeyalias"} <= changed & set(TRUST)


def test_the_specs_keep_alive_is_the_one_ssh_keeps() -> None:
    """ssh keeps the first value of an option: the spec's ServerAliveInterval replaces sparkc's 15 s."""
    result = compile_spec(with_changes(example(NATIVE), {"cluster.ssh.options": ["ServerAliveInterval=60"]}))
    assert result.plan is not None
    words = [w for group in result.plan.ssh_options for w in group]
    options = [words[i + 1] for i, w in enumerate(words) if w == "-o"]
    assert ssh_config(*options)["serveraliveinterval"] == "60"
    assert ssh_config(*options)["connecttimeout"] == "10"


def test_plan_md_shows_every_ssh_option() -> None:
    options = ["Compression=yes", "ProxyJump=me@bastion:2222"]
    result = compile_spec(with_changes(example(NATIVE), {"cluster.ssh.options": options}))
    assert result.plan is not None
    line = next(line for line in result.files["PLAN.md"].splitlines() if line.startswith("Every ssh to a node"))
    for group in result.plan.ssh_options:
        assert " ".join(group) in line
