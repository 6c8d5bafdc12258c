"""The split output: each script holds its deployment, lib/ holds sparkc's code once, and a script refuses to
run (exit 2, before any node is touched) where lib/ is not the library it was compiled with."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest

from compiler.output import bash_constants, render
from compiler.output.library import library_path, library_sha256, library_text
from compiler.output.lint import LintCache, lint_scripts
from compiler.pipeline import GeneratedScriptError, compile_text
from compiler.tools.check_library import check
from tests.fakes.cluster import FakeCluster
from tests.specs import EXAMPLES as EXAMPLE_FOLDER
from tests.specs import compile_spec, dump, example, with_changes

SEED = "seed-qwen35-122b-2spark-ray"
EXAMPLES = ["seed-qwen35-122b-2spark-ray", "qwen3-32b-2spark-control-data", "solo-qwen3-32b-api-key"]


@pytest.fixture
def fake(tmp_path: Path) -> FakeCluster:
    cluster = FakeCluster(tmp_path)
    cluster.prepare(SEED)
    return cluster


def the_library(fake: FakeCluster) -> Path:
    (found,) = (fake.build / "lib").iterdir()
    return found


@pytest.mark.parametrize("script", ["launch-cluster.sh", "stop-cluster.sh", "status.sh", "logs.sh", "distribute.sh"])
@pytest.mark.parametrize("damage", ["changed", "missing"])
def test_a_changed_or_missing_library_stops_the_script_before_any_node_is_touched(
    fake: FakeCluster, script: str, damage: str
) -> None:
    library = the_library(fake)
    if damage == "changed":
        library.write_text(library.read_text() + "log() { :; }\n")
    else:
        library.unlink()
    done = fake.run(script)
    assert done.returncode == 2, done.stderr
    assert fake.calls() == [] and fake.ssh_calls() == []  # no ssh, no docker, no ip: nothing touched
    fix = "has changed since sparkc wrote it" if damage == "changed" else "is missing: copy the whole build folder"
    assert f"{script}: {library} {fix}" in done.stderr
    assert "compile the spec again with sparkc" in done.stderr


def test_the_intact_library_runs(fake: FakeCluster) -> None:
    done = fake.run("launch-cluster.sh", "--dry-run")
    assert done.returncode == 0, done.stderr
    assert "dry run complete" in done.stdout


def test_without_a_sha256_tool_the_script_says_so(fake: FakeCluster, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin-without-sha"
    bin_dir.mkdir()
    for tool in ("bash", "cat", "dirname"):
        (bin_dir / tool).symlink_to(next(p for d in ("/usr/bin", "/bin") if (p := Path(d, tool)).exists()))
    env = {"PATH": str(bin_dir), "FAKE_STATE": str(fake.state)}  # no fakes either: nothing may be called
    done = subprocess.run(
        [str(bin_dir / "bash"), str(fake.build / "stop-cluster.sh")], env=env, capture_output=True, text=True
    )
    assert done.returncode == 2
    assert "neither sha256sum (coreutils) nor shasum (perl) is installed" in done.stderr
    assert fake.calls() == []


def test_one_library_for_every_deployment_recorded_in_each_manifest() -> None:
    libraries = set()
    for name in EXAMPLES:
        result = compile_spec(example(name))
        assert result.plan is not None
        path = library_path(result.plan.sparkc_version)
        libraries.add(result.files[path])
        manifest = json.loads(result.files["manifest.json"])
        assert manifest["library"] == {"path": path, "sha256": library_sha256(result.plan.sparkc_version)}
        assert f"readonly SPARKC_LIB_SHA256={manifest['library']['sha256']}" in result.files["deployment.sh"]
        assert result.files[".gitattributes"].endswith("lib/** linguist-generated=true\n")
        assert len(result.files["launch-cluster.sh"].splitlines()) < 20
    assert len(libraries) == 1
    (text,) = libraries
    assert "sparkc-embed" not in text and "SPARKC_PREFLIGHT_REMOTE_LIB='" in text


def test_no_value_of_a_spec_reaches_the_library() -> None:
    marker = "zz-no-such-deployment-name"
    result = compile_spec(with_changes(example(SEED), {"name": marker}))
    assert result.plan is not None
    assert marker not in result.files[library_path(result.plan.sparkc_version)]
    assert marker in result.files["deployment.sh"]
    assert result.files[library_path(result.plan.sparkc_version)] == library_text(result.plan.sparkc_version)


@pytest.mark.parametrize(
    ("value", "finding"),
    [("a'; EVIL=1; '", "EVIL appears unused"), ("a'; exit 0; '", "SC2317")],
)
def test_a_value_that_escapes_broken_quoting_is_caught_by_the_sentinel(
    monkeypatch: pytest.MonkeyPatch, value: str, finding: str
) -> None:
    """A new assignment is read by no sentinel (SC2034), an exit leaves the sentinel unreachable (SC2317)."""
    # A quoting bug where templates and deployment.sh's constants quote one value (commands keep theirs, so
    # the value's other copies in the docker-run words do not hide it behind a syntax error).
    for module in (render, bash_constants):
        monkeypatch.setattr(module, "quote", lambda v: f"'{v}'")
    render.environment.cache_clear()
    try:
        text = dump(with_changes(example(SEED), {"model.name": value}))
        result = compile_text(text, "spec.yaml", lint=False)
        assert result.plan is not None
        files = render.render(result.plan)
        found = [f for f in lint_scripts(files, LintCache(None), plan=result.plan) if finding in f]
        assert found
        for line in found:  # at the script's own line
            name, number, _ = line.split(":", 2)
            if number.isdigit() and "EVIL" in finding:
                assert "EVIL=1" in files[name].splitlines()[int(number) - 1], line
        with pytest.raises(GeneratedScriptError):
            compile_text(text, "spec.yaml", lint_cache=False)
    finally:
        render.environment.cache_clear()


def test_the_library_and_the_node_snippets_are_shellcheck_clean() -> None:
    """What sparkc is built with: the library in its feature matrix, the node side as POSIX sh (slow: the
    library is read once per script it is checked with)."""
    assert check(EXAMPLE_FOLDER) == []  # the checkout's examples: an installed sparkc has none


def test_an_earlier_versions_library_is_removed_and_nothing_deeper(tmp_path: Path) -> None:
    from compiler.output.emit import emit

    files = compile_spec(example(SEED)).files
    emit(files, tmp_path)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    for name in ("lib/sparkc-0.0.1.sh", "lib/deeper/x.sh", "patches/x.sh"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("old\n")
        manifest["files"][name] = hashlib.sha256(b"old\n").hexdigest()  # as that compile recorded it
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    # lib/ holds one file per sparkc version: an earlier one's is sparkc's to remove. A file deeper in lib/
    # is no name sparkc writes; a patch file the plan did not record is kept, with a warning.
    done = emit(files, tmp_path)
    assert done.removed == ["lib/sparkc-0.0.1.sh"] and done.kept == ["patches/x.sh"]
    assert not (tmp_path / "lib/sparkc-0.0.1.sh").exists()
    assert (tmp_path / "lib/deeper/x.sh").exists() and (tmp_path / "patches/x.sh").exists()
