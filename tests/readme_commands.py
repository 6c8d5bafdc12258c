"""The commands of README.md's first code block, by section, exactly as README writes them.

The block's sections each start with a comment line; `section("quick start")` is the text of the
section whose comment starts with those words. Run as a script, it prints a section for a shell:
`.ci/run` runs README's test command this way, so CI runs what README tells users to run.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def sections(readme: Path = README) -> dict[str, str]:
    """Each section of the first ```bash block: its comment (without '# ') -> its command lines."""
    match = re.search(r"^```bash\n(.*?)^```$", readme.read_text(encoding="utf-8"), re.S | re.M)
    if match is None:
        raise ValueError(f"{readme} has no ```bash code block")
    found: dict[str, str] = {}
    title = ""
    for line in match.group(1).splitlines():
        if line.startswith("# "):
            title = line[2:]
            found[title] = ""
        elif line.strip() and title:
            found[title] += line + "\n"
    return found


def section(start: str, readme: Path = README) -> str:
    """The command lines of the section whose comment starts with `start`."""
    matches = [text for title, text in sections(readme).items() if title.startswith(start)]
    if len(matches) != 1:
        raise ValueError(f"{readme}: {len(matches)} sections of the first code block start with {start!r}")
    return matches[0]


if __name__ == "__main__":
    sys.stdout.write(section(" ".join(sys.argv[1:])))
