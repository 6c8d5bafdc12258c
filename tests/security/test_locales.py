"""The generated scripts started by a caller whose locale is GBK, Big5 or Shift_JIS: there a byte 0x5C
(backslash) can be the second half of a character, so a backslash that escapes `$` inside double quotes
in UTF-8 is eaten by the character before it. A value ending in such a character and followed by
`$(touch CANARY)` is put in every free-text field; no script may run it, whatever it is asked."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from compiler.output.emit import emit
from compiler.output.render import SCRIPTS, render
from compiler.pipeline import compile_text
from tests.fakes.cluster import FakeCluster
from tests.security.conftest import LEGACY_LOCALES
from tests.security.corpus import CANARY, NATIVE
from tests.security.harness import spec_text
from tests.security.test_scripts import every_field
from tests.specs import example, with_changes

pytestmark = pytest.mark.security


@pytest.mark.parametrize("locale", LEGACY_LOCALES)
def test_no_value_runs_in_a_legacy_multibyte_locale(
    locale: str, locale_path: str, fake_path: str, tmp_path: Path
) -> None:
    canary = tmp_path / CANARY
    value = f"{LEGACY_LOCALES[locale][1]}$(touch {canary})"
    result = compile_text(spec_text(with_changes(example(NATIVE), every_field(value))), "spec.yaml", render_files=False)
    assert result.ok and result.plan is not None, result.diagnostics
    build = tmp_path / "build"
    emit(render(result.plan), build)
    fake = FakeCluster(tmp_path / "fake")
    env = {k: v for k, v in os.environ.items() if k not in ("FAKE_NODE", "LANG") and not k.startswith("LC_")}
    env.update(PATH=fake_path, FAKE_STATE=str(fake.state), LOCPATH=locale_path, LC_ALL=locale)
    runs = [[script, "--help"] for script in SCRIPTS] + [["launch-cluster.sh", "--dry-run"]]
    for script, *args in runs:
        subprocess.run(["bash", str(build / script), *args], env=env, capture_output=True, timeout=60)
        assert not canary.exists(), f"{script} {' '.join(args)} ran the value under {locale}"
    assert fake.calls() == []


@pytest.mark.parametrize("locale", LEGACY_LOCALES)
def test_every_script_runs_in_a_legacy_multibyte_locale(
    locale: str, locale_path: str, fake_path: str, tmp_path: Path
) -> None:
    """Not only safe but working: each script finds its folder and its library and answers --help, and
    the launcher's dry run prints what it would run, as under UTF-8. The build folder's name ends in a
    byte that starts a character in these character sets, then a newline."""
    result = compile_text(spec_text(example(NATIVE)), "spec.yaml", render_files=False)
    assert result.ok and result.plan is not None, result.diagnostics
    build = Path(os.fsdecode(bytes(tmp_path) + b"/build\x8f\nx\n"))
    emit(render(result.plan), build)
    fake = FakeCluster(tmp_path / "fake")
    env = {k: v for k, v in os.environ.items() if k not in ("FAKE_NODE", "LANG") and not k.startswith("LC_")}
    env.update(PATH=fake_path, FAKE_STATE=str(fake.state), LOCPATH=locale_path)

    def run(locale: str, script: str, *args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            ["bash", str(build / script), *args], env={**env, "LC_ALL": locale}, capture_output=True, timeout=60
        )
        return subprocess.CompletedProcess(done.args, done.returncode, done.stdout.decode(errors="replace"), "")

    for script in SCRIPTS:
        shown = run(locale, script, "--help")
        assert shown.returncode == 0 and shown.stdout.startswith("Usage:"), f"{script} --help under {locale}"
    dry, reference = (run(name, "launch-cluster.sh", "--dry-run") for name in (locale, "C.UTF-8"))
    assert dry.returncode == reference.returncode == 0
    assert _untimed(dry.stdout) == _untimed(reference.stdout) and "docker run" in dry.stdout


def _untimed(text: str) -> list[str]:
    """The lines without their clock time and durations."""
    lines = [line.split(" ", 1)[-1] if line[:2].isdigit() else line for line in text.splitlines()]
    return [re.sub(r"\bin [0-9]+s\b", "in Ns", line) for line in lines]
