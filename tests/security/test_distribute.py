"""distribute.sh's copies: every ssh it starts (the commands to the nodes, and each copy stream, whose
words a relay on the way hands on through a quoted command line) gets the ssh options a spec gives as
exactly the words compiled: no more ssh options, nothing run, for a key path holding quotes."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from compiler.plan import Plan
from tests.fakes.cluster import BIN, FakeCluster
from tests.security.corpus import CANARY, NATIVE, PAYLOADS
from tests.specs import with_changes

pytestmark = pytest.mark.security


IDENTITIES = {
    # the reproducer: with sh_quote's '\'' rsync ended its quoting and ssh got -oProxyCommand and -E
    "proxycommand": f"/home/aurora/.ssh/id_ed25519' \"-oProxyCommand=touch {CANARY}\" -E '",
    "obrien": "/home/o'brien/.ssh/id",
    "doubled": "/home/a''b/\"\"x",
    **{name: f"/home/aurora/.ssh/{PAYLOADS[name]}" for name in ("quote_escape", "space")},
    "all_quotes": f"/k/{PAYLOADS['canary_all_quotes']}",
}


def fake_env(fake: FakeCluster) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "FAKE_NODE"}
    env.update(PATH=f"{BIN}{os.pathsep}{env['PATH']}", FAKE_STATE=str(fake.state))
    return env


def ssh_words(plan: Plan) -> list[str]:
    return [word for group in plan.ssh_options for word in group]


@pytest.mark.parametrize("name", IDENTITIES)
def test_copies_give_ssh_exactly_the_compiled_options(name: str, tmp_path: Path) -> None:
    """An identity file's path with quotes and ssh options in it reaches every ssh that distribute.sh starts
    as the one word compiled (the old rsync -e string once ended its quoting there and ran a ProxyCommand)."""
    canary = tmp_path / CANARY
    identity = IDENTITIES[name].replace(CANARY, str(canary))
    fake = FakeCluster(tmp_path / "fake")
    spec = with_changes(fake.adapt(NATIVE), {"cluster.ssh.identity_file": identity})
    result = fake.compile(spec)
    assert result.ok and result.plan is not None, result.diagnostics
    plan = result.plan
    for node in plan.nodes[1:]:
        # Copies go to the fabric address, whose key nobody recorded: the management name's must cover it.
        fake.add_node(node.name, node.fabric_target, known=False)
        shutil.rmtree(fake.state / "nodes" / node.name / "images", ignore_errors=True)  # so the image is sent
    proc = subprocess.run(
        ["bash", str(fake.build / "distribute.sh"), "--image-only"],
        env=fake_env(fake),
        capture_output=True,
        text=True,
        timeout=120,
    )
    calls = fake.ssh_calls()
    assert calls, proc.stdout + proc.stderr
    assert "spark-b: image missing: copy" in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    assert not canary.exists(), "the ProxyCommand ran"
    options = ssh_words(plan)
    streams = 0
    for argv in calls:
        words = argv[1:] if argv[0] == "-G" else argv
        if words[1].startswith("HostKeyAlias="):  # a copy stream: the node's key name first, then the same
            words = words[2:]
            streams += 1
        assert words[: len(options)] == options, f"ssh got {argv}, compiled {options}"
    assert streams, calls  # the copies themselves were started
