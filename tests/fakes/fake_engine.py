"""Processes the fake docker starts: a Ray head's listener, or an OpenAI-compatible engine stand-in."""

import json
import socket
import sys
import time
from http.server import BaseHTTPRequestHandler, HTTPServer


def listen(host: str, port: int) -> None:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen()
    while True:
        conn, _ = sock.accept()
        conn.close()


class _Handler(BaseHTTPRequestHandler):
    served = ""
    api_key = ""

    def _send(self, code: int, body: dict) -> None:
        # As vLLM (Starlette's JSONResponse) answers: compact, raw UTF-8.
        data = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _unauthorized(self) -> bool:
        # vLLM's and SGLang's API-key middleware: /v1 routes need the bearer token.
        if not self.api_key or not self.path.startswith("/v1"):
            return False
        if self.headers.get("Authorization") == f"Bearer {self.api_key}":
            return False
        self._send(401, {"error": "Unauthorized"})
        return True

    def do_GET(self) -> None:
        if self._unauthorized():
            return
        if self.path == "/health":
            self._send(200, {})
        elif self.path == "/v1/models":
            self._send(200, {"object": "list", "data": [{"id": self.served, "object": "model"}]})
        else:
            self._send(404, {"error": "not found"})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self._unauthorized():
            return
        if body.get("model") != self.served:
            self._send(404, {"error": f"model {body.get('model')} does not exist"})
        else:
            self._send(200, {"object": "text_completion", "choices": [{"text": "pong"}]})

    def log_message(self, *args) -> None:
        pass


def serve(port: int, served: str, api_key: str = "") -> None:
    handler = type("Handler", (_Handler,), {"served": served, "api_key": api_key})
    time.sleep(0.5)  # a moment of "loading", so the launcher sees the port closed first
    HTTPServer(("127.0.0.1", port), handler).serve_forever()


if __name__ == "__main__":
    if sys.argv[1] == "listen":
        listen(sys.argv[2], int(sys.argv[3]))
    else:
        serve(int(sys.argv[2]), sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else "")
