"""Host paths that climb out or name the system: distribute.sh mirrors the weights' folders to every node
with `rsync --delete`, fetch-model.sh downloads into the cache, the containers write their caches and
writable mounts. A spec that named /, /etc or a path through `..` there would replace or write to that
folder on every node: refused at its line and column, with what to write instead."""

from __future__ import annotations

import pytest

from tests.specs import compile_spec, dump, example, with_changes

pytestmark = pytest.mark.security

NATIVE = "llama33-70b-2spark-native"  # its first mount is writable
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
