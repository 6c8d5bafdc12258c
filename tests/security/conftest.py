from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fakes.cluster import BIN
from tests.product import needs


@pytest.fixture(scope="session")
def fake_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    """PATH for scripts run on the fakes: the fake ssh, docker and ip first, then a `python3` that is this
    interpreter without `site` (the fakes use the standard library only and start thousands of times
    here; the site-packages' .pth hooks would triple each start)."""
    python_dir = tmp_path_factory.mktemp("python")
    python3 = python_dir / "python3"
    python3.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -S "$@"\n', encoding="utf-8")
    python3.chmod(0o755)
    return os.pathsep.join([str(BIN), str(python_dir), os.environ["PATH"]])


# The legacy multibyte encodings where a byte 0x5C (backslash) can end a two-byte character, built from
# glibc's C locale source (a few seconds each; LC_CTYPE, what bash decodes a script with, comes from
# the character map). Under each, the character given ends in a byte that takes the next 0x5C along.
LEGACY_LOCALES = {"C.GBK": ("GBK", "表"), "C.BIG5": ("BIG5", "表"), "C.SJIS": ("SHIFT_JIS", "機")}


@pytest.fixture(scope="session")
def locale_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    """LOCPATH for the LEGACY_LOCALES, built with localedef (Debian's libc-bin and locales)."""
    charmaps = Path("/usr/share/i18n/charmaps")
    maps = [charmaps / f"{charmap}.gz" for charmap, _ in LEGACY_LOCALES.values()]
    needs(
        shutil.which("localedef") is None or not all(path.exists() for path in maps),
        "needs localedef and the GBK, BIG5 and SHIFT_JIS character maps (Debian package locales)",
    )
    root = tmp_path_factory.mktemp("locales")
    for name, (charmap, _) in LEGACY_LOCALES.items():
        # -c: SHIFT_JIS puts the yen sign at 0x5C, which localedef warns is not ASCII (exit 1); that is the point.
        subprocess.run(
            ["localedef", "-c", "--no-warnings=ascii", "-i", "C", "-f", charmap, str(root / name)],
            check=False,
            capture_output=True,
        )
        needs(not (root / name / "LC_CTYPE").exists(), f"localedef could not build {name}")
    return str(root)
