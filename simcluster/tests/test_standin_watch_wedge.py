"""The stand-in engine wedges as multi-node vLLM on Ray does: after N generations the next one is accepted
and never answered, while /health keeps answering; by its environment or by a control file written later."""

from __future__ import annotations

import json
import socket
import urllib.request
from pathlib import Path

import pytest

from simcluster.tests.test_standin import _serve

pytestmark = pytest.mark.cluster

BODY = json.dumps({"model": "tiny", "prompt": "ping", "max_tokens": 1}).encode()


def generation_answers(url: str, timeout: float = 3) -> bool:
    """Whether a one-token generation gets its first byte within `timeout`; raises if the connection fails."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        head = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        head += f"Content-Length: {len(BODY)}\r\n\r\n"
        sock.sendall(head.encode() + BODY)  # accepted: the whole request went in
        try:
            return sock.recv(1) != b""
        except TimeoutError:
            return False


def health(url: str) -> int:
    return int(urllib.request.urlopen(f"{url}/health", timeout=3).status)


@pytest.fixture
def model(tmp_path: Path) -> Path:
    (tmp_path / "config.json").write_text(
        json.dumps({"num_attention_heads": 8, "num_key_value_heads": 2, "max_position_embeddings": 256})
    )
    return tmp_path


def test_after_n_generations_the_next_hangs_while_health_answers(model: Path) -> None:
    served = _serve(["vllm", "serve", str(model), "--served-model-name", "tiny"], {"SPARKC_STANDIN_WEDGE_AFTER": "2"})
    url = next(served)
    try:
        assert generation_answers(url) and generation_answers(url)
        assert not generation_answers(url)
        assert health(url) == 200
    finally:
        next(served, None)


def test_a_control_file_wedges_a_running_engine(model: Path, tmp_path: Path) -> None:
    control = tmp_path / "wedge"
    served = _serve(
        ["vllm", "serve", str(model), "--served-model-name", "tiny"], {"SPARKC_STANDIN_WEDGE_FILE": str(control)}
    )
    url = next(served)
    try:
        assert generation_answers(url)
        control.write_text("0\n")
        assert not generation_answers(url)
        assert health(url) == 200
    finally:
        next(served, None)
