"""`cluster: {file: ...}`: one cluster file shared by many specs, its problems at its own line and column."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from compiler.cli.main import cli
from compiler.pipeline import compile_text
from tests.specs import dump, example

NATIVE = "llama33-70b-2spark-native"


def _split(tmp_path: Path, cluster_text: str | None = None, reference: str = "cluster.yaml") -> Path:
    """The example as a spec in tmp_path/specs/ whose cluster is ../cluster.yaml; returns the spec's path."""
    spec = example(NATIVE)
    cluster = spec.pop("cluster")
    spec["cluster"] = {"file": reference}
    (tmp_path / "specs").mkdir(exist_ok=True)
    (tmp_path / "cluster.yaml").write_text(cluster_text if cluster_text is not None else dump({"cluster": cluster}))
    path = tmp_path / "specs" / "model.yaml"
    path.write_text(dump(spec))
    return path


def _compile(path: Path) -> tuple[str, list[str]]:
    result = compile_text(path.read_text(), str(path), render_files=False)
    lines = [f"{d.file or path}:{d.line}:{d.column}: {d.message}" for d in result.diagnostics]
    return ("ok" if result.ok else "error"), lines


def test_cluster_file_gives_the_same_plan_as_the_inline_section(tmp_path: Path) -> None:
    path = _split(tmp_path, reference="../cluster.yaml")
    split = compile_text(path.read_text(), str(path))
    inline = compile_text(dump(example(NATIVE)), "spec.yaml")
    assert split.ok and inline.ok and split.plan and inline.plan
    assert split.plan.nodes[1].env == replace(inline.plan, spec_sha256=split.plan.spec_sha256).nodes[1].env
    assert [n.fabric_ip for n in split.plan.nodes] == ["192.168.100.10", "192.168.100.11"]
    manifest = json.loads(split.files["manifest.json"])
    cluster_text = (tmp_path / "cluster.yaml").read_bytes()

    assert manifest["cluster_file"] == {
        "path": "../cluster.yaml",  # as the spec names it, relative to the spec's folder
        "sha256": hashlib.sha256(cluster_text).hexdigest(),
    }
    assert manifest["spec"]["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    # Container labels and the launcher's "already running" check see a changed cluster file too.
    assert manifest["spec"]["inputs_sha256"] == split.plan.spec_sha256 != manifest["spec"]["sha256"]


def test_problems_inside_the_cluster_file_point_at_it(tmp_path: Path) -> None:
    text = (
        "cluster:\n"
        "  ssh: {user: Aurora}\n"
        "  nodes:\n"
        "    - name: a\n"
        "      fabric: {ip: 10.0.0.1, netdev: enp1s0f1np1}\n"
        "    - name: a\n"
        "      fabric: {ip: 10.0.0.2, netdev: enp1s0f1np1}\n"
    )
    path = _split(tmp_path, text, reference="../cluster.yaml")
    status, lines = _compile(path)
    cluster = tmp_path / "cluster.yaml"
    assert status == "error"
    assert f"{cluster}:2:15: 'Aurora' must be a user name" in lines
    text = text.replace("Aurora", "aurora")
    (tmp_path / "cluster.yaml").write_text(text)
    status, lines = _compile(path)
    assert status == "error"
    assert any(line.startswith(f"{cluster}:6:13: 'a' is already used") for line in lines), lines  # the second 'a'


def test_yaml_errors_of_the_cluster_file_name_it(tmp_path: Path) -> None:
    path = _split(tmp_path, "cluster:\n  nodes: [\n", reference="../cluster.yaml")
    status, lines = _compile(path)
    assert status == "error" and lines[0].startswith(f"{tmp_path / 'cluster.yaml'}:3:") and "YAML syntax" in lines[0]


@pytest.mark.parametrize(
    ("text", "where", "words"),
    [
        ("nodes: []\n", "1:1", "holds one key, 'cluster:'"),
        ("cluster:\n  file: other.yaml\n", "2:3", "cannot name another cluster file"),
        ("cluster:\n  nodes: []\nname: x\n", "3:1", "belongs in the spec"),
        ("cluster: 3\n", "1:10", "must be a mapping"),
    ],
)
def test_a_cluster_file_holds_only_a_cluster_section(tmp_path: Path, text: str, where: str, words: str) -> None:
    path = _split(tmp_path, text, reference="../cluster.yaml")
    status, lines = _compile(path)
    assert status == "error" and any(line.startswith(f"{tmp_path / 'cluster.yaml'}:{where}: ") for line in lines), lines
    assert any(words in line for line in lines), lines


@pytest.mark.parametrize(
    ("reference", "words"),
    [
        ("../missing.yaml", "cannot read the cluster file: {tmp}/missing.yaml: no such file"),
        ("..", "cannot read the cluster file: {tmp}: a folder, not a plain file"),
        ("~/cluster.yaml", "'~' is not expanded here"),
        ("", "must be the path of a cluster file"),
    ],
)
def test_an_unusable_reference_is_an_error_at_the_spec_line(tmp_path: Path, reference: str, words: str) -> None:
    path = _split(tmp_path, reference=reference)
    status, lines = _compile(path)
    line = next(n for n, text in enumerate(path.read_text().splitlines(), 1) if text.strip().startswith("file:"))
    assert status == "error" and len(lines) == 1
    assert lines[0].startswith(f"{path}:{line}:") and words.format(tmp=tmp_path) in lines[0], lines


def test_other_keys_beside_file_are_refused(tmp_path: Path) -> None:
    path = _split(tmp_path, reference="../cluster.yaml")
    path.write_text(path.read_text().replace("  file: ../cluster.yaml", "  file: ../cluster.yaml\n  head: spark-a"))
    status, lines = _compile(path)
    assert status == "error" and any("move 'head' there" in line and str(path) in line for line in lines), lines


def test_an_absolute_path_is_taken_as_it_is(tmp_path: Path) -> None:
    path = _split(tmp_path, reference=str(tmp_path / "cluster.yaml"))
    status, lines = _compile(path)
    about_the_file = [line for line in lines if "cluster" in line]  # the example's own warnings aside
    assert status == "ok" and not about_the_file, lines


def test_check_notices_a_changed_cluster_file(tmp_path: Path) -> None:
    path = _split(tmp_path, reference="../cluster.yaml")
    out = tmp_path / "build"
    runner = CliRunner()
    assert runner.invoke(cli, ["compile", str(path), "-o", str(out)]).exit_code == 0
    assert runner.invoke(cli, ["compile", str(path), "-o", str(out), "--check"]).exit_code == 0
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(cluster.read_text().replace("192.168.100.11", "192.168.100.12"))
    check = runner.invoke(cli, ["compile", str(path), "-o", str(out), "--check"])
    assert check.exit_code == 1 and "manifest.json" in check.output
    # A comment changes no setting, but the recorded sha256 of the cluster file: --check says so too.
    assert runner.invoke(cli, ["compile", str(path), "-o", str(out)]).exit_code == 0
    cluster.write_text(cluster.read_text() + "# re-cabled on Tuesday\n")
    assert runner.invoke(cli, ["compile", str(path), "-o", str(out), "--check"]).exit_code == 1


def test_the_schema_editors_read_accepts_the_file_form_and_every_example() -> None:
    """Editors validate the spec as written, before sparkc replaces `cluster: {file}` by the file's section."""
    from jsonschema import Draft202012Validator

    from compiler.spec.schema import editor_schema
    from tests.specs import EXAMPLES

    validator = Draft202012Validator(editor_schema())
    with_file = {**example("solo-qwen3-32b"), "cluster": {"file": "../cluster.yaml"}}
    assert not list(validator.iter_errors(with_file))
    assert list(validator.iter_errors({**with_file, "cluster": {"file": "c.yaml", "head": "spark-a"}}))
    assert list(validator.iter_errors({**with_file, "cluster": {"file": ""}}))
    for path in sorted(EXAMPLES.glob("*.yaml")):
        assert not list(validator.iter_errors(example(path.stem))), path.name


def test_check_of_a_spec_with_a_cluster_file_does_not_depend_on_the_working_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _split(tmp_path, reference="./../specs/../cluster.yaml")
    out = tmp_path / "build"
    runner = CliRunner()
    monkeypatch.chdir(tmp_path)
    assert runner.invoke(cli, ["compile", "specs/model.yaml", "-o", str(out)]).exit_code == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["cluster_file"]["path"] == "../cluster.yaml"
    for folder, spelled in ((tmp_path / "specs", "model.yaml"), (Path("/"), str(path))):
        monkeypatch.chdir(folder)
        check = runner.invoke(cli, ["compile", spelled, "-o", str(out), "--check"])
        assert check.exit_code == 0, check.output
