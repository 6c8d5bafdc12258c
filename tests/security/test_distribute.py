"""distribute.sh's copies with real rsync: rsync splits its `-e` string by rules of its own (spaces;
'...' and "..." group; a doubled quote inside them is one; no backslash escapes), so the ssh options a
spec gives must come back from that split as exactly the words compiled: no more ssh options, nothing
run, and the copy works for a key path holding a quote."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from compiler.plan import Plan
from tests.fakes.cluster import BIN, FakeCluster
from tests.product import needs
from tests.security.corpus import CANARY, NATIVE, PAYLOADS
from tests.security.harness import launcher_functions
from tests.specs import dry_commands, with_changes

pytestmark = pytest.mark.security


@pytest.fixture(autouse=True)
def rsync_installed() -> None:
    needs(shutil.which("rsync") is None, "needs rsync (Debian package rsync)")


# Sources distribute.sh without its `distribute_main "$@"`, then runs distribute_main --model-only. The fake
# nodes share the head's disk, so a worker's folder is reported missing once (the copy then runs, onto
# the same folder) and as it is afterwards, when the script checks that the copy arrived.
DRIVER = r"""
# shellcheck source=/dev/null
source "$1"
eval "real_$(declare -f model_signature)"
model_signature() {
  if [[ $1 != "$SPARKC_HEAD" && ! -e $FAKE_STATE/asked.$1 ]]; then
    : >"$FAKE_STATE/asked.$1"
    echo missing
  else
    real_model_signature "$@"
  fi
}
distribute_main --model-only
"""

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
def test_rsync_gives_ssh_exactly_the_compiled_options(name: str, tmp_path: Path) -> None:
    canary = tmp_path / CANARY
    identity = IDENTITIES[name].replace(CANARY, str(canary))
    fake = FakeCluster(tmp_path / "fake")
    spec = fake.adapt(NATIVE)
    spec = with_changes(spec, {"cluster.ssh.identity_file": identity})
    (Path(spec["model"]["path"]) / "weights.bin").write_bytes(b"w" * 1000)
    result = fake.compile(spec)
    assert result.ok and result.plan is not None, result.diagnostics
    plan = result.plan
    for node in plan.nodes[1:]:
        # Copies go to the fabric address, whose key nobody recorded: the management name's must cover it.
        fake.add_node(node.name, node.fabric_target, known=False)
    functions = fake.build / "distribute-functions.sh"
    functions.write_text(launcher_functions((fake.build / "distribute.sh").read_text()), encoding="utf-8")

    proc = subprocess.run(
        ["bash", "-c", DRIVER, "driver", str(functions)],
        env=fake_env(fake),
        capture_output=True,
        text=True,
        timeout=60,
    )
    rsync_calls = [argv for argv in fake.ssh_calls() if "rsync" in argv]
    assert not canary.exists(), "the ProxyCommand ran"
    assert rsync_calls, proc.stdout + proc.stderr
    options = ssh_words(plan)
    aliases = {f"HostKeyAlias={node.ssh_target.rsplit('@', 1)[-1].lower()}" for node in plan.nodes[1:]}
    for argv in rsync_calls:
        assert argv[: len(options)] == options, f"rsync gave ssh {argv}, compiled {options}"
        # then the node's ssh name as the name its host key is known by, then rsync's own words
        assert argv[len(options)] == "-o" and argv[len(options) + 1] in aliases, argv
        assert argv[len(options) + 2 : len(options) + 4] == ["-l", "aurora"], argv
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "model copied" in proc.stdout


RECORDING_RSYNC = """#!/bin/sh
# rsync as it was called (one word a line, NUL-separated), then the real one.
printf '%s\\0' "$@" >"$RSYNC_RECORD"
exec {rsync} "$@"
"""


def test_the_dry_run_prints_the_copy_exactly_as_it_runs_delete_included(tmp_path: Path) -> None:
    """The dry run printed `rsync -a FOLDER/ NODE:FOLDER/`: the copy that runs has --delete, so what a
    reviewer read would not remove anything and what ran did."""
    fake = FakeCluster(tmp_path / "fake")
    spec = fake.adapt(NATIVE)
    (Path(spec["model"]["path"]) / "weights.bin").write_bytes(b"w" * 1000)
    result = fake.compile(spec)
    assert result.ok and result.plan is not None, result.diagnostics
    plan = result.plan
    for node in plan.nodes[1:]:
        fake.add_node(node.name, node.fabric_target)
    functions = fake.build / "distribute-functions.sh"
    functions.write_text(launcher_functions((fake.build / "distribute.sh").read_text()), encoding="utf-8")
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "rsync").write_text(RECORDING_RSYNC.format(rsync=shutil.which("rsync")), encoding="utf-8")
    (shim / "rsync").chmod(0o755)
    record = tmp_path / "rsync-argv"
    env = fake_env(fake)
    env.update(PATH=f"{shim}{os.pathsep}{env['PATH']}", RSYNC_RECORD=str(record))

    def distribute(*options: str) -> subprocess.CompletedProcess[str]:
        driver = DRIVER.replace("distribute_main --model-only", f"distribute_main --model-only {' '.join(options)}")
        for asked in fake.state.glob("asked.*"):
            asked.unlink()
        return subprocess.run(
            ["bash", "-c", driver, "driver", str(functions)], env=env, capture_output=True, text=True, timeout=60
        )

    dry = distribute("--dry-run")
    assert dry.returncode == 0 and not record.exists(), dry.stdout + dry.stderr
    printed = dry_commands(dry.stdout, plan.head)
    assert all("'mkdir'" not in argv[-1] for argv in fake.ssh_calls())  # a dry run runs nothing
    run = distribute()
    assert run.returncode == 0, run.stdout + run.stderr
    ran = ["rsync", *record.read_text(encoding="utf-8").split("\0")[:-1]]
    made = [["ssh", *argv] for argv in fake.ssh_calls() if argv[-1].startswith("'mkdir' ")]
    assert printed == [*made, ran]
    assert "--delete" in ran
