"""The runtime's own tests (runtime/tests/*.bats): its functions without a cluster, run by bats."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from tests.specs import ROOT


def test_the_runtime_passes_its_bats_tests() -> None:
    bats = shutil.which("bats")
    if bats is None:
        if os.environ.get("CI") == "1":
            pytest.fail("bats is not installed, and CI must run the runtime's tests (apt-get install bats)")
        pytest.skip("bats is not installed (apt-get install bats): the runtime's own tests did not run")
    done = subprocess.run(
        [bats, "--tap", "runtime/tests"], cwd=ROOT, capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "not ok" not in done.stdout and "bats warning" not in done.stdout + done.stderr, done.stdout
