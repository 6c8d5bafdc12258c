"""The test helpers in tests/specs.py: a change that silently did not apply would weaken every test using it."""

from __future__ import annotations

import pytest

from tests.specs import DELETE, example, flag_value, flag_values, with_changes, words_after


def test_with_changes_sets_creates_indexes_and_deletes() -> None:
    spec = example("llama33-70b-2spark-native")
    env = {"A": "1"}
    changed = with_changes(
        spec,
        {
            "engine.port": 9000,
            "cluster.nodes.1.fabric.netdev": "x",
            "cluster.nodes.1.env.NCCL_DEBUG": "WARN",  # the node has no env: mapping yet
            "new.deeper.key": 1,
            "container.env": env,
            "container.secrets": DELETE,
            "cluster.nodes.0": DELETE,  # in order: from here on spark-b is node 0
        },
    )
    env["A"] = "2"
    assert "env" not in spec["cluster"]["nodes"][1] and "secrets" in spec["container"]  # the original is as it was
    assert changed["engine"]["port"] == 9000 and changed["cluster"]["nodes"][0]["env"] == {"NCCL_DEBUG": "WARN"}
    assert [n["name"] for n in changed["cluster"]["nodes"]] == ["spark-b"]
    assert changed["cluster"]["nodes"][0]["fabric"]["netdev"] == "x"
    assert changed["container"]["env"] == {"A": "1"} and "secrets" not in changed["container"]
    assert changed["new"] == {"deeper": {"key": 1}} and changed["model"] == spec["model"]


@pytest.mark.parametrize("key", ["cluster.nodes.2.name", "cluster.nodes.first.name", "engine.kind.x"])
def test_with_changes_refuses_a_path_that_is_not_there(key: str) -> None:
    with pytest.raises((KeyError, TypeError)):
        with_changes(example("llama33-70b-2spark-native"), {key: "x"})


def test_flag_value_reads_both_spellings_and_refuses_ambiguity() -> None:
    argv = ("docker", "run", "-e", "A=1", "-e", "B", "--port=8000", "img", "--node-rank", "1")
    assert flag_value(argv, "--port") == "8000" and flag_value(argv, "--node-rank") == "1"
    assert flag_values(argv, "-e") == ["A=1", "B"]
    assert words_after(argv, "img") == ("--node-rank", "1")
    for flag in ("-e", "--absent"):
        with pytest.raises(AssertionError):
            flag_value(argv, flag)
