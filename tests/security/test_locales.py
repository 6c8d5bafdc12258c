"""The generated scripts started by a caller whose locale is GBK, Big5 or Shift_JIS: there a byte 0x5C
(backslash) can be the second half of a character, so a backslash that escapes `$` inside double quotes
in UTF-8 is eaten by the character before it. A value ending in such a character and followed by
`$(touch CANARY)` is put in every free-text field; no script may run it, whatever it is asked."""

from __future__ import annotations

import os
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
