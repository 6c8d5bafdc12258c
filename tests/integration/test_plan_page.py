"""build/PLAN.md, the reviewer's page: what it shows, that no value can break out of its place on it,
and that `sparkc explain` shows the same "what runs where" rows."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler.cli.main import cli
from compiler.output.plan_page import FILE_PURPOSES, PAGE, code, fenced, mermaid_text
from compiler.output.render import SCRIPTS
from compiler.output.runs_where import HIDDEN_KEY, runs_where, visible
from tests.specs import compile_spec, dump, example, with_changes

markdown_it = pytest.importorskip("markdown_it")

# Everything Markdown or HTML could make something of: pipes (with a backslash before one), runs of
# backticks, HTML, a comment's end, a link, bare URLs and an address GitHub would link, emphasis, an
# entity, a heading mark, a right-to-left override.
HOSTILE = (
    "a|b\\|c`d``e <img src=x onerror=alert(1)> --> [x](https://evil.example) www.evil.example "
    "x@evil.example *em* _u_ &amp; # h\u202eZ"
)


def render(markdown: str) -> str:
    return str(markdown_it.MarkdownIt("commonmark").enable("table").render(markdown))


def text_of(fragment: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", fragment))


def gfm_cells(row: str) -> list[str]:
    """A table row's cells as GitHub's parser (cmark-gfm) splits them: a backslash and the ASCII
    punctuation after it are one character, every other `|` ends a cell."""
    cells, cell, i = [], "", 0
    body = row.strip()
    body = body[1:] if body.startswith("|") else body
    while i < len(body):
        if body[i] == "\\" and i + 1 < len(body) and body[i + 1] in r"""!"#$%&'()*+,-./:;<=>?@[\]^_`{|}~""":
            cell, i = cell + body[i : i + 2], i + 2
        elif body[i] == "|":
            cells, cell, i = [*cells, cell], "", i + 1
        else:
            cell, i = cell + body[i], i + 1
    return cells + ([cell] if cell.strip() else [])


def hostile_page() -> tuple[str, str]:
    spec = with_changes(
        example("llama33-70b-2spark-native"),
        {
            "cluster.nodes.1.env": {"GREETING": HOSTILE},
            "container.env": {"SHARED": HOSTILE},
            "model.name": HOSTILE,
            "container.hooks": {"pre_engine": [HOSTILE]},
            "engine.args": ["--api-key", "sk-|`<b>key"],
        },
    )
    result = compile_spec(spec, "spec|`<i>\n# x.yaml")
    assert result.ok
    return result.files[PAGE], result.files["manifest.json"]


def test_hostile_values_stay_in_their_cells_and_make_no_html_or_links() -> None:
    page, _ = hostile_page()
    assert HOSTILE.split("|")[0] in page  # the values are really on the page
    # Every table row has as many cells as its header, as GitHub splits them.
    for table in re.findall(r"(?:^\|.*\|$\n?)+", page, flags=re.MULTILINE):
        rows = table.strip("\n").split("\n")
        widths = {len(gfm_cells(row)) for row in rows}
        assert widths == {len(gfm_cells(rows[0]))}, table
    shown = render(page)
    # Outside code, nothing of the values is left: no tag, no link, nothing GitHub could autolink.
    outside = re.sub(r"<code[^>]*>.*?</code>", "", shown, flags=re.DOTALL)
    for fragment in ("evil", "onerror", "<img", "<a ", "<em>", "<strong>", "\u202e"):
        assert fragment not in outside
    # And each value reads back exactly (a right-to-left override written out as <U+202E>).
    cells = [text_of(c) for c in re.findall(r"<td>(.*?)</td>", shown, flags=re.DOTALL)]
    assert cells.count(visible(HOSTILE)) == 2  # spark-b's GREETING, the shared SHARED
    assert visible("spec|`<i>\n# x.yaml") in text_of(shown)
    # The command block is not ended early by the value's backticks: all of it is one block.
    (block,) = [b for b in re.findall(r"<pre><code[^>]*>(.*?)</code></pre>", shown, flags=re.DOTALL) if "docker" in b]
    assert "--served-model-name" in block and "--master-port" in block and "--master-port" not in outside


def test_a_key_in_engine_args_is_never_on_the_page_nor_in_explains_rows(tmp_path: Path) -> None:
    page, manifest = hostile_page()
    assert "sk-|`<b>key" in manifest  # it is in the scripts and the manifest (the compile warns) ...
    assert "sk-" not in page and HIDDEN_KEY in page  # ... but the page shows only that it is there
    spec = tmp_path / "spec.yaml"
    changes = {"engine.args": ["--api-key=sk-secret"], "container.secrets": ["HF_TOKEN"]}
    spec.write_text(dump(with_changes(example("llama33-70b-2spark-native"), changes)), encoding="utf-8")
    result = CliRunner().invoke(cli, ["explain", str(spec), "--format", "json"])
    assert result.exit_code == 0, result.output
    rows = json.dumps(json.loads(result.stdout)["runs_where"])
    assert "sk-secret" not in rows and f"--api-key={HIDDEN_KEY}" in rows
    assert json.loads(result.stdout)["runs_where"]["secrets"] == ["HF_TOKEN"]  # names only


@pytest.mark.parametrize(
    "value",
    ["plain", "a|b", "\\|", "a\\|b\\\\|c", "`", "``x``", "` x `", "  ", " a ", "|", "||", "x\\", "<b>&amp;</b>", ""],
)
def test_a_code_span_reads_back_exactly_in_text_and_in_a_cell(value: str) -> None:
    assert text_of(render(f"x {code(value)} y")).strip() == f"x {value} y".strip()
    cell = re.search(r"<td>(.*?)</td>", render(f"| h |\n|---|\n| {code(value)} |"), flags=re.DOTALL)
    assert cell is not None and text_of(cell.group(1)) == value


@settings(max_examples=300, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(alphabet="`|\\ <>&*_[]()!#ab\u202e\n", max_size=12))
def test_any_value_reads_back_from_its_cell(value: str) -> None:
    row = f"| {code(value)} | after |"
    assert len(gfm_cells(row)) == 2
    cells = re.findall(r"<td>(.*?)</td>", render(f"| h | g |\n|---|---|\n{row}"), flags=re.DOTALL)
    assert [text_of(c) for c in cells] == [visible(value), "after"]


def test_a_code_block_fence_outlasts_any_backticks_inside() -> None:
    block = fenced(["a ``` b", "````", "c"], "bash")
    assert block.startswith("`````bash\n") and block.endswith("\n`````")
    assert text_of(render(block + "\n\nafter")).startswith("a ``` b\n````\nc")


def test_a_mermaid_label_holds_only_plain_characters_and_entities() -> None:
    label = mermaid_text('a"]-->b[<script>|x|`\n')
    assert re.fullmatch(r"[A-Za-z0-9 .:/_#;-]*", label), label
    assert '"' not in label and "]" not in label and "<" not in label and "|" not in label


def test_the_page_lists_each_node_once_and_only_the_values_that_differ() -> None:
    page = compile_spec(example("qwen3-32b-2spark-ray-crosscabled")).files[PAGE]
    differs = page.split("## What differs per node")[1].split("<details>")[0]
    assert "| `NCCL_IB_GID_INDEX` | `3` | `5` |" in differs  # a GID pinned per node
    assert "| `NCCL_IB_HCA` | `rocep1s0f1,roceP2p1s0f1` | `rocep1s0f0,roceP2p1s0f0` |" in differs
    assert "HF_HUB_OFFLINE" not in differs  # shared: in the folded list, once
    assert page.count("`HF_HUB_OFFLINE`") == 1
    # The engine command once, and the worker's Ray start by its differences.
    assert page.count("--distributed-executor-backend ray") == 1
    assert "drops `--head`" in page and "adds `--address=192.168.100.10:6379`" in page


def test_the_diagram_follows_rank_order_and_shows_both_planes() -> None:
    spec = with_changes(example("qwen3-32b-2spark-control-data"), {"cluster.head": "spark-b"})
    page = compile_spec(spec).files[PAGE]
    diagram = page.split("```mermaid\n")[1].split("```")[0]
    assert diagram.index('n0["spark-b (head') < diagram.index('n1["spark-a (worker')
    assert 'n0 -.-|"enP7s7 10.0.0.11"| control' in diagram
    assert 'n0 -.->|"ssh aurora#64;spark-a.local"| n1' in diagram
    assert compile_spec(spec).files[PAGE] == page  # the same bytes again


def test_every_generated_file_has_its_line() -> None:
    assert set(FILE_PURPOSES) == {*SCRIPTS, "deployment.sh", "manifest.json", PAGE}


def test_explain_shows_what_runs_where_as_the_page_does(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(dump(example("llama33-70b-2spark-native")), encoding="utf-8")
    text = CliRunner().invoke(cli, ["explain", str(spec)])
    assert text.exit_code == 0, text.output
    where = text.stdout.split("what runs where")[1]
    assert "    --node-rank 0\n" in where  # the head's command, one group per line
    assert "spark-b (worker, rank 1, over ssh aurora@spark-b.local) runs the same but for:" in where
    assert "    --node-rank 0 -> --node-rank 1\n    + --headless" in where
    assert "VLLM_HOST_IP" in where and "spark-b=192.168.100.11" in where
    document = json.loads(CliRunner().invoke(cli, ["explain", str(spec), "--format", "json"]).stdout)
    assert document["name"] == "llama33-70b"  # the plan's keys stay where they were
    (worker,) = [n for n in document["runs_where"]["nodes"] if n["name"] == "spark-b"]
    assert {"head": ["--node-rank", "0"], "node": ["--node-rank", "1"]} in worker["changes"]
    assert {"head": [], "node": ["--headless"]} in worker["changes"]
    plan = compile_spec(example("llama33-70b-2spark-native")).plan
    assert plan is not None and worker["changes"] == [
        {"head": list(c.head), "node": list(c.node)} for c in runs_where(plan).nodes[1].changes
    ]
