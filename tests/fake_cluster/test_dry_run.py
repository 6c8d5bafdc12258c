"""launch-cluster.sh --dry-run on a machine without docker, ssh or curl: it prints, runs nothing.

Each command is printed one flag per line in `docker run \\` style, values shell-quoted, secrets by
name only: as readable as the script itself.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.specs import compile_into, example, with_changes

# What the scripts may use on a bare machine; docker, ssh and curl are deliberately missing. sha256sum checks
# lib/ (a Mac has shasum instead: either will do).
_TOOLS = ("bash", "date", "cat", "grep", "tr", "cut", "mkdir", "rm", "mktemp", "dirname", "sleep", "env", "timeout")
_TOOLS += ("sha256sum",)
SECRET_VALUE = "s3cr3t-value-never-printed"


def bare_path(tmp_path: Path) -> str:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in _TOOLS:
        found = shutil.which(tool)
        assert found, tool
        (bin_dir / tool).symlink_to(found)
    return str(bin_dir)


def dry_run(tmp_path: Path, name: str, *args: str) -> subprocess.CompletedProcess[str]:
    spec = with_changes(example(name), {"container.secrets": ["HF_TOKEN"]})
    compile_into(spec, tmp_path / "build")
    env = {"PATH": bare_path(tmp_path), "HOME": str(tmp_path), "HF_TOKEN": SECRET_VALUE}
    return subprocess.run(
        [shutil.which("bash") or "bash", str(tmp_path / "build" / "launch-cluster.sh"), "--dry-run", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("name", ["seed-qwen35-122b-2spark-ray", "solo-qwen3-32b", "sglang-qwen3-30b-2spark"])
def test_dry_run_needs_no_docker_ssh_or_curl(tmp_path: Path, name: str) -> None:
    done = dry_run(tmp_path, name)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "command not found" not in done.stderr and "FAILED" not in done.stderr
    assert "'docker' is not installed here; a real launch stops here" in done.stderr
    assert "dry run complete" in done.stdout
    assert SECRET_VALUE not in done.stdout + done.stderr
    assert not (tmp_path / "build" / "last-launch.txt").exists() and not (tmp_path / "build" / "logs").exists()


def command_blocks(stdout: str, node: str, start: str) -> list[str]:
    """The printed commands of `node` that start with `start`, their continuation lines joined."""
    lines = stdout.splitlines()
    blocks = []
    for i, line in enumerate(lines):
        if line.startswith(f"[{node}] {start}"):
            block = [line]
            while block[-1].endswith(" \\"):
                block.append(lines[i + len(block)])
            blocks.append("\n".join(block))
    return blocks


def test_docker_run_is_printed_one_flag_per_line(tmp_path: Path) -> None:
    done = dry_run(tmp_path, "seed-qwen35-122b-2spark-ray")
    # The engine's container (the fabric probe's, named ...-probe, is printed too).
    (block,) = [b for b in command_blocks(done.stdout, "spark-b", "docker run") if "-spark-b \\\n" in b]
    lines = block.splitlines()
    assert lines[0] == "[spark-b] docker run \\"
    assert "    --name sparkc-qwen35-122b-spark-b \\" in lines
    assert "    -e NCCL_IB_HCA=rocep1s0f1,roceP2p1s0f1 \\" in lines  # quoted only where the shell needs it
    assert any(line.startswith("    -e 'SPARKC_RAY_NON_CARRY_OVER=[\"") for line in lines)
    assert "    -e HF_TOKEN \\" in lines  # the secret by name; its value travels over ssh's stdin
    assert all(line.endswith(" \\") for line in lines[:-1]) and not lines[-1].endswith("\\")
    # The block is the command as the shell reads it: the words docker would get.
    words = shlex.split(block.removeprefix("[spark-b] ").replace("\\\n", " "))
    assert words[:2] == ["docker", "run"] and "hellohal2064/vllm-qwen3.5-gb10:latest" in words
    assert words[words.index("--name") + 1] == "sparkc-qwen35-122b-spark-b"


def test_short_commands_stay_on_one_line(tmp_path: Path) -> None:
    done = dry_run(tmp_path, "seed-qwen35-122b-2spark-ray")
    assert "[spark-b] docker rm -f sparkc-qwen35-122b-spark-b\n" in done.stdout
