"""A small OpenAI-shaped HTTP API, answered the way vLLM's server answers it."""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from . import log, wedge
from .metrics import Metrics


@dataclass(frozen=True)
class ServeInfo:
    engine: str
    model_path: str
    served_names: tuple[str, ...]
    max_model_len: int
    health_only: bool = False  # SGLang ranks > 0 answer /health and nothing else
    api_key: str | None = None  # vLLM and SGLang: /v1/* needs `Authorization: Bearer KEY`; /health never
    engines: int = 1  # vLLM's data-parallel engines behind this API server (its /metrics' engine label)
    metrics: bool = True  # /metrics served (SGLang: only under --enable-metrics)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, addr: tuple[str, int], info: ServeInfo) -> None:
        self.info = info
        self.metrics = Metrics(info.engine, info.served_names[0], info.max_model_len, info.engines)
        super().__init__(addr, _Handler)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    server_version = "uvicorn"
    sys_version = ""

    # ------------------------------------------------------------------ plumbing

    def log_message(self, format: str, *args: Any) -> None:
        # uvicorn's access-log shape: 'IP:PORT - "GET /health HTTP/1.1" 200'
        status = args[1] if len(args) > 1 else ""
        log.info(f'{self.client_address[0]}:{self.client_address[1]} - "{self.requestline}" {status}')

    def _send(self, status: int, body: Any | None = None) -> None:
        # As vLLM (Starlette's JSONResponse) and SGLang (orjson) answer: compact, raw UTF-8.
        data = b"" if body is None else json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _send_metrics(self) -> None:
        data = self.server.metrics.render()
        self.send_response(200)
        self.send_header("Content-Type", self.server.metrics.content_type())
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, kind: str, message: str) -> None:
        self._send(status, {"object": "error", "message": message, "type": kind, "param": None, "code": status})

    def _read_json(self) -> dict[str, Any] | None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError as exc:
            self._error(400, "BadRequestError", f"Invalid JSON body: {exc}")
            return None
        if not isinstance(body, dict):
            self._error(400, "BadRequestError", "Request body must be a JSON object")
            return None
        return body

    # ------------------------------------------------------------------ routes

    def _unauthorized(self, path: str) -> bool:
        """Both engines' API-key middleware: only /v1 routes are guarded; a wrong or missing bearer
        token gets 401 {"error": "Unauthorized"}."""
        key = self.server.info.api_key
        if not key or not path.startswith("/v1"):
            return False
        if self.headers.get("Authorization", "") == f"Bearer {key}":
            return False
        if self.command == "POST":
            self.rfile.read(int(self.headers.get("Content-Length") or 0))  # the connection stays usable
        self._send(401, {"error": "Unauthorized"})
        return True

    def do_GET(self) -> None:
        info = self.server.info
        path = self.path.split("?", 1)[0]
        if self._unauthorized(path):
            return
        if path == "/health":
            self._send(200)
        elif info.health_only:
            self._send(404, {"detail": "Not Found"})
        elif path == "/v1/models":
            now = int(time.time())
            data = [
                {
                    "id": name,
                    "object": "model",
                    "created": now,
                    "owned_by": "tensorrt_llm" if info.engine == "trtllm" else info.engine,
                    "root": info.model_path,
                    "parent": None,
                    "max_model_len": info.max_model_len,
                }
                for name in info.served_names
            ]
            self._send(200, {"object": "list", "data": data})
        elif path == "/metrics" and info.metrics:
            self._send_metrics()
        elif path == "/version":
            self._send(200, {"version": "0.0.0+sparkc-standin"})
        else:
            self._send(404, {"detail": "Not Found"})

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0]
        if self._unauthorized(path):
            return
        if self.server.info.health_only or path not in ("/v1/completions", "/v1/chat/completions"):
            self._send(404, {"detail": "Not Found"})
            return
        body = self._read_json()
        if body is None:
            return
        wedge.hold_if_wedged()
        self._complete(body, chat=path.endswith("chat/completions"))

    def _complete(self, body: dict[str, Any], chat: bool) -> None:
        info = self.server.info
        model = body.get("model") or info.served_names[0]
        if model not in info.served_names:
            self._error(404, "NotFoundError", f"The model `{model}` does not exist.")
            return
        if chat:
            messages = body.get("messages")
            if not isinstance(messages, list) or not messages:
                self._error(400, "BadRequestError", "'messages' must be a non-empty list")
                return
            prompt = " ".join(str(m.get("content", "")) for m in messages if isinstance(m, dict))
        else:
            raw_prompt = body.get("prompt")
            if raw_prompt is None:
                self._error(400, "BadRequestError", "'prompt' is required")
                return
            prompt = " ".join(raw_prompt) if isinstance(raw_prompt, list) else str(raw_prompt)
        max_tokens = body.get("max_tokens", body.get("max_completion_tokens", 16))
        if not isinstance(max_tokens, int) or max_tokens < 1:
            self._error(400, "BadRequestError", "max_tokens must be a positive integer")
            return
        prompt_tokens = max(1, len(prompt.split()))
        if prompt_tokens + max_tokens > info.max_model_len:
            self._error(
                400,
                "BadRequestError",
                f"This model's maximum context length is {info.max_model_len} tokens. However, you "
                f"requested {prompt_tokens + max_tokens} tokens ({prompt_tokens} in the messages, "
                f"{max_tokens} in the completion). Please reduce the length of the messages or completion.",
            )
            return
        metrics = self.server.metrics
        engine = metrics.start(prompt_tokens)
        text = " ".join(f"tok{i}" for i in range(max_tokens))
        metrics.finish(engine, prompt_tokens, max_tokens)
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": max_tokens,
            "total_tokens": prompt_tokens + max_tokens,
        }
        now = int(time.time())
        if chat:
            choice: dict[str, Any] = {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "length",
            }
            self._send(
                200,
                {
                    "id": f"chatcmpl-{uuid.uuid4().hex}",
                    "object": "chat.completion",
                    "created": now,
                    "model": model,
                    "choices": [choice],
                    "usage": usage,
                },
            )
        else:
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": "length"}
            self._send(
                200,
                {
                    "id": f"cmpl-{uuid.uuid4().hex}",
                    "object": "text_completion",
                    "created": now,
                    "model": model,
                    "choices": [choice],
                    "usage": usage,
                },
            )


def bind(host: str, port: int, info: ServeInfo) -> ThreadingHTTPServer:
    """Binds the socket; raises OSError (address in use, ...) like uvicorn would report."""
    return _Server((host, port), info)
