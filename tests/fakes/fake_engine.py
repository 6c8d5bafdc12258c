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


def serve(port: int, served: str) -> None:
    class Handler(BaseHTTPRequestHandler):
        def _send(self, code: int, body: dict) -> None:
            # As vLLM (Starlette's JSONResponse) answers: compact, raw UTF-8.
            data = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path == "/health":
                self._send(200, {})
            elif self.path == "/v1/models":
                self._send(200, {"object": "list", "data": [{"id": served, "object": "model"}]})
            else:
                self._send(404, {"error": "not found"})

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if body.get("model") != served:
                self._send(404, {"error": f"model {body.get('model')} does not exist"})
            else:
                self._send(200, {"object": "text_completion", "choices": [{"text": "pong"}]})

        def log_message(self, *args) -> None:
            pass

    time.sleep(0.5)  # a moment of "loading", so the launcher sees the port closed first
    HTTPServer(("127.0.0.1", port), Handler).serve_forever()


if __name__ == "__main__":
    if sys.argv[1] == "listen":
        listen(sys.argv[2], int(sys.argv[3]))
    else:
        serve(int(sys.argv[2]), sys.argv[3])
