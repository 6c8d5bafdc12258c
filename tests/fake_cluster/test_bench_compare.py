"""`sparkc bench-compare`: the summaries bench.sh writes on the fake cluster (its benchmark runs against the
stand-in engine), side by side as text, Markdown, JSON and a picture; bad folders refused with exit 2."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from tests.fakes.cluster import FakeCluster
from tests.product import run_sparkc
from tests.specs import with_changes

SOLO = "solo-qwen3-32b.yaml"


def bench(fake: FakeCluster, out: Path, *args: str) -> Path:
    run = fake.run("bench.sh", "--prompts", "4", "--out", str(out), *args)
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"sparkc bench-compare {out} OTHER" in run.stdout
    return out


def launch(fake: FakeCluster, changes: dict[str, object] | None = None) -> None:
    fake.compile(with_changes(fake.adapt(SOLO), changes or {}))
    launched = fake.run("launch-cluster.sh", "--no-probe")
    assert launched.returncode == 0, launched.stdout + launched.stderr


@pytest.fixture
def two_specs(fake: FakeCluster) -> tuple[Path, Path, Path]:
    """A at concurrency 1 and 4; B the same deployment at 1, 4 and 8; C another spec, other prompt lengths."""
    launch(fake)
    a = bench(fake, fake.build / "a", "--concurrency", "1,4")
    b = bench(fake, fake.build / "b", "--concurrency", "1,4,8")
    fake.run("stop-cluster.sh")
    launch(fake, {"engine.max_model_len": 16384})
    c = bench(fake, fake.build / "c", "--concurrency", "1", "--input-len", "256")
    return a, b, c


def test_runs_side_by_side_with_changes_and_what_differs(fake: FakeCluster, two_specs, tmp_path: Path) -> None:
    a, b, c = two_specs
    markdown = tmp_path / "compare.md"
    shown = run_sparkc("bench-compare", a, b / "summary.json", c, "--markdown", markdown)
    assert shown.returncode == 0, shown.stdout + shown.stderr
    lines = shown.stdout.splitlines()
    manifest = json.loads((fake.build / "manifest.json").read_text())
    assert lines[2].startswith(f"C: {c}: ") and manifest["spec"]["sha256"][:12] in lines[2]
    assert "B against A: the same spec and image" in lines
    assert "C against A: another spec" in lines
    assert any(line.startswith("warning: C used 256 tokens in and 128 out, A 512 and 128") for line in lines)
    rows = {tuple(line.split()[-6:-3]): line for line in lines if line.startswith("output tok/s")}
    assert len(rows) == 3  # concurrency 1, 4 and 8: a level a run lacks is "-", not a zero
    eight = next(line for line in lines if line.startswith("output tok/s") and line.split()[2] == "8")
    assert eight.split()[3] == "-" and eight.split()[5] == "-"
    one = next(line for line in lines if line.startswith("output tok/s") and line.split()[2] == "1").split()
    base, later = float(one[3]), float(one[4])
    assert one[6] == f"{(later - base) / base * 100:+.1f}%"
    page = MarkdownIt("commonmark").enable("table").render(markdown.read_text())
    assert page.count("<tr>") == 1 + 6 * 3 and "<th>B vs A</th>" in page


def test_json_and_a_picture_that_is_the_same_each_time(fake: FakeCluster, two_specs, tmp_path: Path) -> None:
    a, b, _ = two_specs
    data = json.loads(run_sparkc("bench-compare", a, b, "--format", "json").stdout)
    assert [run["label"] for run in data["runs"]] == ["A", "B"]
    assert sorted(data["runs"][1]["figures"]) == ["1", "4", "8"]
    assert data["runs"][0]["figures"]["4"]["output_throughput"] > 0
    pictures = []
    for name in ("one.png", "two.png", "one.svg", "two.svg"):
        drawn = run_sparkc("bench-compare", a, b, "--plot", tmp_path / name)
        assert drawn.returncode == 0, drawn.stderr
        pictures.append((tmp_path / name).read_bytes())
    assert pictures[0].startswith(b"\x89PNG") and pictures[0] == pictures[1]
    assert b"<svg" in pictures[2] and pictures[2] == pictures[3]


def test_what_is_not_a_summary_is_refused_with_the_fix(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    broken = tmp_path / "broken.json"
    broken.write_text('{"deployment": "x",\n  "runs": [}\n')
    other = tmp_path / "other.json"
    other.write_text('{"completed": 4}')
    cases = {
        empty: f"{empty}: no summary.json here; give a folder bench.sh wrote",
        broken: f"{broken}:2:12: not JSON",
        other: f"{other}: deployment, spec_sha256 or image_id is missing",
    }
    for given, message in cases.items():
        refused = run_sparkc("bench-compare", given)
        assert refused.returncode == 2 and message in refused.stderr, refused.stderr
    assert "name a .png, .svg or .pdf file" in run_sparkc("bench-compare", empty, "--plot", "x.gif").stderr
    assert "compare at most 8 at once" in run_sparkc("bench-compare", *[empty] * 9).stderr


def test_the_picture_without_its_extra_says_how_to_install_it(fake: FakeCluster, tmp_path: Path) -> None:
    launch(fake)
    a = bench(fake, fake.build / "a", "--concurrency", "1")
    blocker = tmp_path / "no-matplotlib"
    (blocker / "matplotlib").mkdir(parents=True)
    (blocker / "matplotlib" / "__init__.py").write_text("raise ImportError('No module named matplotlib')\n")
    refused = run_sparkc(
        "bench-compare", a, "--plot", tmp_path / "p.png", env={**os.environ, "PYTHONPATH": str(blocker)}
    )
    assert refused.returncode == 2 and "pip install 'sparkc[plot]'" in refused.stderr, refused.stderr
    assert not (tmp_path / "p.png").exists()
