"""The nodes' `docker run` words split into what all share and what each adds: every word keeps its place."""

from __future__ import annotations

from compiler.output.bash_words import split_runs

IMAGE = "vllm/vllm-openai:v0.11.0"


def joined(runs_shared: tuple[tuple[str, ...], ...], own: tuple[tuple[str, ...], ...]) -> list[str]:
    return [w for g in (*runs_shared, *own) for w in g]


def test_an_engine_word_equal_to_an_option_stays_the_nodes_own() -> None:
    # `--privileged` is a docker option of both nodes and, after the image, a value the engine is given.
    head = [("docker", "run"), ("--privileged",), (IMAGE,), ("serve",), ("--privileged",)]
    worker = [("docker", "run"), ("--privileged",), ("-e", "RANK=1"), (IMAGE,), ("--privileged",)]
    runs = split_runs([head, worker], IMAGE)
    assert runs.shared == (("docker", "run"), ("--privileged",))
    assert runs.own[0] == ((IMAGE,), ("serve",), ("--privileged",))
    assert runs.own[1] == (("-e", "RANK=1"), (IMAGE,), ("--privileged",))
    for node, command in enumerate((head, worker)):
        words = joined(runs.shared, runs.own[node])
        for g, group in enumerate(command):
            for w, word in enumerate(group):
                assert words[runs.position(node, g, w)] == word


def test_shared_options_keep_the_heads_order_and_each_node_its_span() -> None:
    head = [("-e", "A=1"), ("--ipc", "host"), (IMAGE,)]
    worker = [("--ipc", "host"), ("-e", "A=1"), ("-e", "B=2"), (IMAGE,)]
    runs = split_runs([head, worker], IMAGE)
    assert runs.shared == (("-e", "A=1"), ("--ipc", "host"))
    assert runs.spans == ("0 1", "1 3")
    assert runs.position(1, 0, 0) == 2  # the worker's `--ipc` sits after the head's `-e A=1`


def test_an_option_given_twice_stays_the_nodes_own() -> None:
    head = [("docker", "run"), ("-e", "A=1"), ("-e", "A=1"), ("--ipc", "host"), (IMAGE,)]
    worker = [("docker", "run"), ("-e", "A=1"), ("--ipc", "host"), (IMAGE,)]
    runs = split_runs([head, worker], IMAGE)
    assert runs.shared == (("docker", "run"), ("--ipc", "host"))
    for node, command in enumerate((head, worker)):
        words = joined(runs.shared, runs.own[node])
        assert sorted(words) == sorted(w for g in command for w in g)
        for g, group in enumerate(command):
            for w, word in enumerate(group):
                assert words[runs.position(node, g, w)] == word
