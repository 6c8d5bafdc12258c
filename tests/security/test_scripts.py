"""The other ways a value meets a shell: `launch-cluster.sh --dry-run` prints every command, and
stop-cluster.sh, status.sh and logs.sh start; each payload a spec takes is put in every field that takes
it at once (and in a secret). Nothing runs, nothing is touched, the scripts pass the lint gate."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from compiler.output.emit import emit
from compiler.output.lint import SHELLCHECK_FLAGS, shellcheck_binary
from compiler.output.render import quote, render
from compiler.pipeline import compile_text
from compiler.resolve.rules.cluster import CONTROL, LINE_BREAKS, MAX_VALUE_BYTES
from tests.fakes.cluster import FakeCluster
from tests.security.corpus import CANARY, ENV_NAME, NATIVE, PAYLOADS, SECRET_NAME
from tests.security.harness import spec_text
from tests.specs import example, with_changes

pytestmark = pytest.mark.security

# Payloads a spec takes in free-text fields: no control characters or separators, not too long, not empty.
SAMPLE = [
    p
    for p, v in PAYLOADS.items()
    if v and not CONTROL.search(v) and not LINE_BREAKS.search(v) and len(v.encode()) <= MAX_VALUE_BYTES
]
# Compiled through the lint gate (shellcheck, bash -n: a second each): one payload for each way
# render.quote() writes a value (plain, single quotes, double quotes with escapes, a leading ~), and the
# quotes, non-ASCII and leading dashes.
LINTED = {
    "squote",
    "dquote",
    "quote_escape",
    "subst",
    "backtick",
    "backslash_end",
    "tilde",
    "tilde_user",
    "space",
    "star",
    "latin",
    "emoji",
    "dash",
    "equals_start",
    "equals_digits",
    "canary_all_quotes",
}


def every_field(value: str) -> dict[str, Any]:
    """The changes that put `value` in every free-text field of the native example (paths where the value
    has no ':' or ',', which paths refuse)."""
    changes: dict[str, Any] = {
        # a served name is refused where it starts with '-' (the engine would read it as a flag)
        "model.name": value if not value.startswith("-") else f"m{value}",
        "engine.args": [f"--chat-template={value}"],  # a flag's value: a word alone is refused at compile
        "container.env": {ENV_NAME: value},
        "engine.env": {f"{ENV_NAME}_ENGINE": value},
        "cluster.nodes.1.env": {f"{ENV_NAME}_NODE": value},
        "container.hooks.pre_engine": [value],
    }
    # host paths refuse a ".." segment (they are mirrored with rsync --delete): those fields keep their own value
    if not set(value) & {":", ","} and ".." not in value:
        changes |= {
            "model.path": f"/srv/models/{value}",
            "model.mount": f"/models/{value}",
            "container.mounts.0.host": f"/srv/{value}",
            "container.mounts.0.container": f"/srv/{value}",
            "cluster.ssh.identity_file": f"/home/aurora/.ssh/{value}",
        }
    return changes


@pytest.mark.parametrize("payload", SAMPLE)
def test_dry_run_and_the_other_scripts_run_nothing(payload: str, tmp_path: Path, fake_path: str) -> None:
    canary = tmp_path / CANARY
    value = PAYLOADS[payload].replace(CANARY, str(canary))
    text = spec_text(with_changes(example(NATIVE), every_field(value)))
    result = compile_text(text, "spec.yaml", render_files=payload in LINTED)
    assert result.ok and result.plan is not None, result.diagnostics
    build = tmp_path / "build"
    emit(result.files or render(result.plan), build)
    fake = FakeCluster(tmp_path / "fake")
    env = {k: v for k, v in os.environ.items() if k != "FAKE_NODE"}
    secret = f"secret-{value}"  # the payload too, but not a value the spec holds (and prints)
    env.update(PATH=fake_path, FAKE_STATE=str(fake.state), **{SECRET_NAME: secret})

    def run(script: str, *args: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(["bash", str(build / script), *args], env=env, capture_output=True, timeout=60)

    dry = run("launch-cluster.sh", "--dry-run")
    assert dry.returncode == 0, dry.stderr.decode(errors="replace")
    assert fake.calls() == [], "a dry run called ssh, docker or ip"
    assert secret.encode() not in dry.stdout + dry.stderr, "a dry run printed the secret"
    for script in ("stop-cluster.sh", "status.sh", "logs.sh"):
        assert run(script, "--help").returncode == 0, script
    assert not canary.exists()


# Words with `=` in the places shellcheck reads one as an assignment or an index: first, after digits,
# after `+` or `@`, and the flags and assignments that stay bare.
EQUALS_WORDS = ["=", "==", "=x", "=a=b", "0=", "12=x", "+=", "a+=b", "@=x", "a=+=b", "-+=", "--x=@=y", "x=1=2"]


def test_words_with_equals_are_shellcheck_clean_and_read_back_as_written(tmp_path: Path) -> None:
    lines = ["#!/usr/bin/env bash", "set -eu"]
    for i, value in enumerate(EQUALS_WORDS):
        word = quote(value)
        lines += [f"readonly V{i}={word}", f"A{i}=(", f"  {word}", f"  x {word}", ")"]
        lines.append(f'printf "%s\\0" {word} "${{A{i}[@]}}" "$V{i}"')
    script = tmp_path / "s.sh"
    script.write_text("\n".join(lines) + "\n", encoding="utf-8")
    lint = subprocess.run([shellcheck_binary(), *SHELLCHECK_FLAGS, str(script)], capture_output=True, text=True)
    assert lint.stdout == "", lint.stdout
    out = subprocess.run(["bash", str(script)], capture_output=True, check=True).stdout.decode()
    assert out.split("\0")[:-1] == [w for v in EQUALS_WORDS for w in (v, v, "x", v, v)]
