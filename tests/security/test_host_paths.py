"""Host paths that climb out or name the system: distribute.sh mirrors the weights' folders to every node
with `rsync --delete`, fetch-model.sh downloads into the cache, the containers write their caches and
writable mounts. A spec that named /, /etc or a path through `..` there would replace or write to that
folder on every node: refused at its line and column, with what to write instead."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fakes.cluster import FakeCluster
from tests.specs import compile_spec, dump, example, with_changes

pytestmark = pytest.mark.security

NATIVE = "llama33-70b-2spark-native"  # its first mount is writable; spark-b is reached over ssh
DRAFT = "llama33-70b-draft-2spark"  # weights in a Hugging Face cache, and a draft model's folder

REFUSED = [
    (NATIVE, "model.path", "/", "system folder /"),
    (NATIVE, "model.path", "/etc", "system folder /etc"),
    (NATIVE, "model.path", "//etc/", "system folder /etc"),
    (NATIVE, "model.path", "/home", "system folder /home"),
    (NATIVE, "model.path", "/var", "system folder /var"),
    (NATIVE, "model.path", "/home/aurora/models/../../../etc", "'..' segments"),
    (NATIVE, "model.path", "/usr/share/models", "inside the system folder /usr"),
    (NATIVE, "model.path", "/proc/self/cwd", "inside the system folder /proc"),
    (NATIVE, "container.mounts.0.host", "/etc/sparkc", "inside the system folder /etc"),
    (NATIVE, "container.mounts.0.host", "/", "system folder /"),
    (NATIVE, "container.mounts.1.host", "/srv/x/../../root", "'..' segments"),
    # Under ~/, the ssh user's home on each node: its keys, the home itself, and a way out of it.
    (NATIVE, "container.mounts.0.host", "~/.ssh", "~/.ssh or inside it"),
    (NATIVE, "container.mounts.1.host", "~/.ssh/authorized_keys", "~/.ssh or inside it"),
    (NATIVE, "container.mounts.0.host", "~/", "the home folder itself"),
    (NATIVE, "container.mounts.1.host", "~/../..", "'..' segments"),
    (NATIVE, "container.mounts.0.host", "~/x/../../../etc", "'..' segments"),
    (NATIVE, "container.cache", {"enabled": True, "host": "/sys/fs/x"}, "inside the system folder /sys"),
    (NATIVE, "cluster.ssh.identity_file", "/home/aurora/.ssh/../../../root/.ssh/id", "'..' segments"),
    (DRAFT, "model.hf_cache", "/boot/hub", "inside the system folder /boot"),
    (DRAFT, "model.draft.path", "/lib/x", "inside the system folder /lib"),
    (DRAFT, "model.draft.path", "/tmp", "system folder /tmp"),
]


def errors_at(base: str, key: str, value: object) -> list[tuple[tuple[str | int, ...], int, str]]:
    result = compile_spec(with_changes(example(base), {key: value}), render_files=False)
    return [(d.path, d.line, d.message) for d in result.diagnostics if d.severity == "error"]


@pytest.mark.parametrize(("base", "key", "value", "says"), REFUSED, ids=[f"{k}={v}" for _, k, v, _ in REFUSED])
def test_a_host_path_that_climbs_out_or_names_the_system_is_refused_at_its_line(
    base: str, key: str, value: object, says: str
) -> None:
    text = dump(with_changes(example(base), {key: value}))
    result = compile_spec(text, render_files=False)
    errors = [d for d in result.diagnostics if d.severity == "error"]
    assert len(errors) == 1, [d.message for d in errors]
    (d,) = errors
    where = tuple(int(p) if p.isdigit() else p for p in key.split("."))
    assert d.path[: len(where)] == where and d.line > 0 and d.column > 0
    path = value["host"] if isinstance(value, dict) else value
    assert path in text.splitlines()[d.line - 1]
    assert says in d.message and "must not" in d.message


ALLOWED = [
    (NATIVE, "model.path", "/home/aurora/models/Llama-3.3-70B-Instruct"),
    (NATIVE, "model.path", "/srv/models/x"),
    (NATIVE, "model.path", "/var/lib/models/x"),
    (NATIVE, "model.path", "/mnt/nvme/models/x"),
    (NATIVE, "model.path", "/home/aurora/./models/x"),
    (NATIVE, "container.mounts.1", {"host": "/etc/localtime", "container": "/etc/localtime"}),  # read-only
    (NATIVE, "container.cache", {"enabled": True, "host": "/var/cache/sparkc/vllm"}),
    (NATIVE, "container.mounts.0.host", "~/.cache/vllm"),
    (NATIVE, "container.mounts.1.host", "~/.ssh-notes"),
    (DRAFT, "model.hf_cache", "/root/.cache/huggingface/hub"),
]


@pytest.mark.parametrize(("base", "key", "value"), ALLOWED, ids=[f"{k}={v}" for _, k, v in ALLOWED])
def test_a_folder_of_its_own_is_taken(base: str, key: str, value: object) -> None:
    assert errors_at(base, key, value) == []


@pytest.mark.parametrize("revision", ["main/../../../../etc/hostname", "../x", "a//b"])
def test_a_revision_that_would_climb_out_of_the_caches_refs_is_refused(revision: str) -> None:
    """The node reads `<repo>/refs/<revision>`: a revision is a name, never a path."""
    (message,) = [m for _, _, m in errors_at(DRAFT, "model.revision", revision)]
    assert "no '..'" in message


# A node's answer for its ssh user's home goes into a `docker run -v` of that node: the answer is checked first.
# Its login files can make it anything: here a home whose name holds a line break, and a pwd that answers a
# relative path (zsh reads ~/.zshenv for every command, as a login file that defines pwd would).
BAD_HOMES = [
    ("home\nwith-a-break", "", "holds a control character"),
    ("zsh-home", "pwd() { echo relative/home; }\n", "is not an absolute path"),
    ("colon:home", "", "holds ':' or ','"),
]


@pytest.mark.parametrize(("folder", "zshenv", "says"), BAD_HOMES, ids=[b[2] for b in BAD_HOMES])
def test_a_nodes_home_answer_that_is_no_plain_absolute_path_is_refused(
    fake: FakeCluster, tmp_path: Path, folder: str, zshenv: str, says: str
) -> None:
    mount = {"host": "~/.cache/vllm", "container": "/root/.cache/vllm", "readonly": False}
    fake.compile(with_changes(fake.adapt(NATIVE), {"container.mounts": [mount]}))
    home = tmp_path / folder
    fake.set_home("spark-b", home)
    if zshenv:
        (home / ".zshenv").write_text(zshenv)
        fake.login_shell("spark-b", "zsh")
    launch = fake.run("launch-cluster.sh", "--skip-preflight", "--no-probe", env={"HOME": str(tmp_path)})
    said = launch.stdout + launch.stderr
    assert launch.returncode == 1, said
    assert "FAILED" in said and "spark-b answered" in said and says in said, said
    assert not [argv for _, argv in fake.docker_calls("spark-b") if argv[:2] == ["run", "-d"]]
