"""The readers of what sparkc did not write, newest surfaces first: bench-compare's summaries, an operator's
image profiles, discover's node answers, import's recipes and mods, profile --inspect. Each meets hostile
content: a FIFO, /dev/zero, a link out, deep nesting, huge numbers, Unicode digits, control and escape
characters, a file named many times. None may hang (each runs as a child, 15 s at most), exit 3, print a
control character, or let a summary's text become HTML or a link."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from compiler.spec import patches
from compiler.tools import discover as disc
from compiler.tools.importer import import_recipe
from compiler.tools.probe import parse
from compiler.user_files import read_bytes
from tests.specs import ROOT, dump, example, with_changes

pytestmark = pytest.mark.security

LIMIT_S = 15
# What a terminal acts on: C0 controls but tab and newline, DEL, C1 controls (OSC 52 writes the clipboard).
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
OSC52 = "\x1b]52;c;cm0gLXJmIH4=\x07"
DEEP = "[" * 50_000 + "]" * 50_000
HUGE = "9" * 5000


def sparkc(*argv: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("SPARKC_DEBUG", None)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "compiler", *map(str, argv)],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=LIMIT_S,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"sparkc {' '.join(map(str, argv))} ran over {LIMIT_S} s")
    assert done.returncode != 3, done.stderr
    assert not CONTROL.search(done.stdout + done.stderr), (done.stdout + done.stderr)[-500:]
    return done


# -- bench-compare ---------------------------------------------------------------------------------------------


def summary(**changes: object) -> dict[str, object]:
    """A summary as runtime/bench_summary.py writes it."""
    row = {"concurrency": 1, "ok": True, "output_throughput": 80.5, "request_throughput": 0.6}
    row |= {"median_ttft_ms": 40.0, "p99_ttft_ms": 55.0, "median_itl_ms": 12.0, "p99_itl_ms": 14.0}
    data: dict[str, object] = {"deployment": "llama", "spec_sha256": "ab" * 32, "image_id": "sha256:" + "cd" * 32}
    data |= {"input_len": 512, "output_len": 128, "runs": [row, {**row, "concurrency": 4}]}
    return data | changes


def summary_file(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "summary.json").write_text(text)
    return folder


@pytest.mark.parametrize("what", ["fifo in the folder", "fifo given", "device"])
def test_bench_compare_refuses_what_is_no_plain_file_at_once(tmp_path: Path, what: str) -> None:
    given: Path | str = "/dev/zero"
    if what != "device":
        (tmp_path / "run").mkdir()
        os.mkfifo(tmp_path / "run" / "summary.json")
        given = tmp_path / "run" if what == "fifo in the folder" else tmp_path / "run" / "summary.json"
    done = sparkc("bench-compare", given, cwd=tmp_path)
    assert done.returncode == 2
    kind = "a named pipe (FIFO)" if what != "device" else "a device"
    assert f"{kind}, not a plain file" in done.stderr


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (DEEP, "nested deeper than 64 levels"),
        (json.dumps(summary(input_len=0)).replace('"input_len": 0', f'"input_len": {HUGE}'), "a number of 5000 digits"),
        (json.dumps(summary(runs=[{"concurrency": 10**30}])), "a whole number from 1 to 9999"),
        (json.dumps(summary(runs=[{"concurrency": 2**70}])), "a whole number from 1 to 9999"),
    ],
    ids=["deep", "5000 digits", "huge concurrency", "concurrency past 64 bits"],
)
def test_bench_compare_refuses_a_summary_no_bench_wrote(tmp_path: Path, text: str, message: str) -> None:
    done = sparkc("bench-compare", summary_file(tmp_path / "run", text), cwd=tmp_path)
    assert done.returncode == 2 and message in done.stderr, done.stderr


HOSTILE_TEXT = "<script>alert(1)</script> [here](https://evil.example) www.evil.example\r\x1b[2J" + OSC52 + "`x`"


def test_bench_compare_markdown_keeps_a_summarys_text_as_text(tmp_path: Path) -> None:
    a = summary_file(tmp_path / "a", json.dumps(summary(deployment=HOSTILE_TEXT, image_id=HOSTILE_TEXT)))
    b = summary_file(tmp_path / "b", json.dumps(summary(spec_sha256="<b>" + HOSTILE_TEXT)))
    done = sparkc("bench-compare", a, b, "--markdown", tmp_path / "c.md", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "c.md").read_text()
    assert not CONTROL.search(text)  # no carriage return, no escape sequence
    page = MarkdownIt("commonmark").enable("table").render(text)
    assert "<script" not in page and "<a " not in page and "<b>" not in page
    assert page.count("<code>") == 2 * 4 and "&lt;script&gt;" in page  # each value shown, as code
    assert page.count("<tr>") == 1 + 6 * 2  # a value cannot add or end a row


def test_bench_compare_draws_a_formula_like_label_as_text(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    for i, deployment in enumerate([r"$\foo$", "$x^{$", "a$b"]):
        run = summary_file(tmp_path / str(i), json.dumps(summary(deployment=deployment)))
        done = sparkc("bench-compare", run, "--plot", tmp_path / f"{i}.svg", cwd=tmp_path)
        assert done.returncode == 0, done.stderr


# -- an operator's image profile -----------------------------------------------------------------------------

PROFILE = """\
family: our vLLM build
match: [registry.example/team/vllm]
engine: vllm
entrypoint: [/app/entrypoint.sh]
args: env-driven
controls:
  gpu_memory_utilization: {env: GPU_UTIL, default: "0.85"}
ray: present
auto: keep
engine_version: {from_tag: 'v(\\d+\\.\\d+\\.\\d+)'}
sources: [our Dockerfile]
"""


def profile_beside(folder: Path, tag: str, **replace: str) -> Path:
    spec = folder / "spec.yaml"
    image = f"registry.example/team/vllm:{tag}"
    spec.write_text(dump(with_changes(example("solo-qwen3-32b"), {"container.image": image})))
    text = PROFILE
    for old, new in replace.items():
        text = text.replace(old, new)
    (folder / "profiles").mkdir()
    (folder / "profiles" / "team.yaml").write_text(text)
    return spec


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        ("(a+)+b", "a group repeated by *, + or {n,m} can make matching take minutes"),
        ("(a|aa)*b", "a group repeated by *, + or {n,m}"),
        (r"(\w*\w*\w*\w*\w*\w*\w*\d)", "7 repeating quantifiers; at most 4"),
        ("v[0-9.]+", "0 capturing groups; write exactly one"),
        ("v([0-9.]+", "not a regular expression: missing ), unterminated subpattern at character 2"),
        (r"(a)\1", "a back-reference makes matching slow"),
    ],
)
def test_a_from_tag_pattern_that_hangs_or_breaks_is_refused_at_its_line(
    tmp_path: Path, pattern: str, message: str
) -> None:
    spec = profile_beside(tmp_path, "a" * 40 + "c", **{r"'v(\d+\.\d+\.\d+)'": f"'{pattern}'"})
    done = sparkc("validate", spec, cwd=tmp_path)
    assert done.returncode == 1
    assert f"profiles/team.yaml:10:28: engine_version.from_tag: {message}" in done.stderr, done.stderr


def test_a_from_tag_pattern_still_reads_the_version(tmp_path: Path) -> None:
    spec = profile_beside(tmp_path, "v0.11.2")
    done = sparkc("explain", spec, "--format", "json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "0.11.2" in done.stdout


@pytest.mark.parametrize(
    ("control", "message"),
    [
        ('gpu_memory_utilization: {env: GPU_UTIL, default: "x"}', "'x' is not a fraction above 0 and at most 1"),
        ('gpu_memory_utilization: {env: GPU_UTIL, default: "1e999"}', "'1e999' is not a fraction"),
        ('port: {env: PORT, default: "٨٠٠٠"}', "is not a port from 1 to 65535 in ASCII digits"),
        (f'max_model_len: {{env: LEN, default: "{HUGE}"}}', "is not a whole number of tokens"),
    ],
)
def test_a_control_default_that_is_no_number_is_refused_at_its_line(tmp_path: Path, control: str, message: str) -> None:
    spec = profile_beside(tmp_path, "v0.11.2", **{'gpu_memory_utilization: {env: GPU_UTIL, default: "0.85"}': control})
    done = sparkc("compile", spec, "-o", tmp_path / "out", cwd=tmp_path)
    assert done.returncode == 1 and re.search(r"profiles/team\.yaml:7:\d+: controls\.\w+\.default: ", done.stderr)
    assert message in done.stderr, done.stderr


# -- discover: what a node answers ---------------------------------------------------------------------------

ANSWER = """\
hostname spark-a
tool nvidia-smi
rdma rocep1s0f1 enp1s0f1np1
gid rocep1s0f1 {index} 0000:0000:0000:0000:0000:ffff:c0a8:640a RoCE v2
netdev enp1s0f1np1 {mtu} up
inet enp1s0f1np1 192.168.100.10/24
gpu NVIDIA GB10{escape}
gpu-error {escape}
end
"""


@pytest.mark.parametrize(("index", "mtu"), [("²", "9000"), ("3", "²"), ("٣", "٩٠٠٠"), (HUGE, HUGE)])
def test_discover_reads_a_nodes_numbers_as_ascii_digits_only(index: str, mtu: str) -> None:
    facts = parse("10.0.0.21", ANSWER.format(index=index, mtu=mtu, escape=""))
    (netdev,) = facts.netdevs
    assert netdev.mtu in (9000, None) and netdev.gids["rocep1s0f1"] in ([3], [])
    assert (netdev.mtu is None) == (not mtu.isascii() or len(mtu) > 7)
    text = disc.to_yaml(disc.choose([facts]), disc.SshSettings(), {})
    assert "netdev: enp1s0f1np1" in text


def test_discover_prints_no_escape_a_node_sent() -> None:
    facts = parse("10.0.0.21", ANSWER.format(index="3", mtu="9000", escape=OSC52 + "\x9b2J\r"))
    choices = disc.choose([facts])
    shown = disc.to_yaml(choices, disc.SshSettings(), {}) + "".join(w for _, w in disc.all_warnings(choices))
    assert not CONTROL.search(shown.replace("\n", "")) and "]52;c;" in shown


# -- import: recipes and their mods --------------------------------------------------------------------------

RECIPE = """\
name: demo
model: org/demo
container: vllm/vllm-openai:v0.11.2
defaults: {{port: 8000}}
command: |
  vllm serve org/demo --port {{port}} {words}
"""


@pytest.mark.parametrize(
    "words",
    [
        "--spec-method ngram --spec-tokens ²",
        "--spec-method ngram --spec-tokens ٣",
        f"--spec-method ngram --spec-tokens {HUGE}",
        f"--data-parallel-size {HUGE}",
        f"--max-model-len {HUGE}",
        f"--tensor-parallel-size {HUGE}",
        "--max-model-len ²",
        "--speculative-config '" + '{"method": "ngram", "x": ' + DEEP + "}'",
        "--speculative-config '" + '{"method": "ngram", "num_speculative_tokens": ' + HUGE + "}'",
    ],
    ids=lambda words: words[:40],
)
def test_import_reads_a_recipes_numbers_as_ascii_digits_without_a_crash(tmp_path: Path, words: str) -> None:
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(RECIPE.format(words=words))
    done = sparkc("import", recipe, cwd=tmp_path)
    assert done.returncode in (0, 1), done.stderr


def test_import_sglang_speculative_steps_in_unicode_digits() -> None:
    recipe = RECIPE.replace("vllm/vllm-openai:v0.11.2", "lmsysorg/sglang:v0.5.4").replace(
        "vllm serve org/demo", "python3 -m sglang.launch_server --model-path org/demo"
    )
    words = "--speculative-algorithm EAGLE --speculative-num-steps ² --speculative-draft-model-path /d"
    spec = import_recipe(recipe.format(words=words), "recipe.yaml").spec_text
    assert "--speculative-num-steps" in spec  # kept as the engine's to judge, not read as a number


@pytest.fixture
def bytes_read(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The size of each file the patch folder reader reads, as it reads them."""
    read: list[int] = []

    def counted(path: Path, limit: int, **options: bool) -> bytes:
        data = read_bytes(path, limit, **options)
        read.append(len(data))
        return data

    monkeypatch.setattr(patches, "read_bytes", counted)
    return read


def test_import_reads_a_mod_named_many_times_once(tmp_path: Path, bytes_read: list[int]) -> None:
    """A 4 MiB mod listed 300 times: at most one patch folder's worth of bytes is read, and it is an error."""
    mod = tmp_path / "repo" / "mods" / "big"
    mod.mkdir(parents=True)
    (mod / "run.sh").write_text("#!/bin/sh\n")
    (mod / "blob.txt").write_text("x" * (patches.MAX_BYTES - 64))
    recipe = RECIPE.format(words="") + "mods:\n" + "  - mods/big\n" * 300
    result = import_recipe(recipe, "recipe.yaml", tmp_path / "repo", "spec-mods")
    assert sum(bytes_read) <= patches.MAX_BYTES
    assert result.errors and not result.files


def test_import_reads_distinct_mods_until_they_no_longer_fit(tmp_path: Path, bytes_read: list[int]) -> None:
    listed = []
    for i in range(6):
        mod = tmp_path / "repo" / "mods" / f"m{i}"
        mod.mkdir(parents=True)
        (mod / "run.sh").write_text("#!/bin/sh\n")
        (mod / "blob.txt").write_text("x" * (patches.MAX_BYTES // 2))
        listed.append(f"  - mods/m{i}\n")
    result = import_recipe(RECIPE.format(words="") + "mods:\n" + "".join(listed), "r.yaml", tmp_path / "repo", "p")
    assert sum(bytes_read) <= 2 * patches.MAX_BYTES + 64
    assert any("the mods hold over 4 MiB" in w.message for w in result.errors)


# -- profile --inspect ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (DEEP, "nested deeper than 64 levels"),
        ('[{"Id": ' + HUGE + ', "Config": {}}]', "a number of 5000 digits"),
    ],
    ids=["deep", "5000 digits"],
)
def test_profile_inspect_refuses_deep_json_and_huge_numbers(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "inspect.json").write_text(text)
    done = sparkc("profile", "img", "--inspect", tmp_path / "inspect.json", cwd=tmp_path)
    assert done.returncode == 2 and f"inspect.json: {message}" in done.stderr, done.stderr


def test_profile_inspect_prints_no_escape_from_the_images_env(tmp_path: Path) -> None:
    config = {"Entrypoint": ["/app/entrypoint.sh"], "Env": [f"PORT=8000{OSC52}"], "Labels": {"a": OSC52}}
    (tmp_path / "inspect.json").write_text(json.dumps([{"Id": "sha256:" + "ab" * 32, "Config": config}]))
    done = sparkc("profile", "img", "--inspect", tmp_path / "inspect.json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr


# -- bench.sh's summary of what the benchmark container wrote ------------------------------------------------


@pytest.mark.parametrize(
    "result",
    [DEEP, "[1, 2]", '{"output_throughput": 1' + "0" * 400 + "}", '{"output_throughput": ' + HUGE + "}", "\x00" * 99],
    ids=["deep", "a list", "past a float", "5000 digits", "NUL bytes"],
)
def test_bench_summary_takes_a_broken_result_as_a_failed_run(tmp_path: Path, result: str) -> None:
    good = {"output_throughput": 80.5, "request_throughput": 0.6, "median_ttft_ms": 40.0}
    (tmp_path / "concurrency-1.json").write_text(json.dumps(good))
    (tmp_path / "concurrency-4.json").write_text(result)
    script = ROOT / "runtime" / "bench_summary.py"
    argv = [sys.executable, script, tmp_path, "llama", "ab" * 32, "sha256:" + "cd" * 32, "512", "128", "1", "4"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=LIMIT_S)
    assert not done.stderr, done.stderr  # no traceback
    runs = json.loads((tmp_path / "summary.json").read_text())["runs"]
    assert runs[0]["ok"] and runs[0]["output_throughput"] == 80.5 and runs[1]["output_throughput"] is None
    assert done.returncode == (0 if runs[1]["ok"] else 1)  # a result that is no JSON object: a failed run
