"""A local stand-in for the Hugging Face hub, answering what huggingface_hub asks when it downloads a repo
(its HfApi.repo_info, list_repo_tree and hf_hub_download; read in huggingface_hub 2.4's hf_api.py and
file_download.py): the revision's commit, the tree with sizes and blob ids (LFS files with their sha256),
and each file by HEAD (X-Repo-Commit, ETag or X-Linked-Etag and X-Linked-Size) and GET, a Range resumed
with 206. A token, when set, is required as `Authorization: Bearer` on every request (else 401, as for
a gated repo); `cut` names files whose first GET breaks off after that many bytes, as a dropped
connection does. Every request is recorded."""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

LFS_SUFFIXES = (".safetensors", ".bin")


@dataclass
class Hub:
    repo: str
    files: dict[str, bytes]
    revision: str = "main"
    token: str = ""
    cut: dict[str, int] = field(default_factory=dict)
    broken: set[str] = field(default_factory=set)  # files whose GET answers 503, as a hub having trouble
    sizes: dict[str, int] = field(default_factory=dict)  # sizes the tree lists instead of the real ones
    requests: list[dict[str, str]] = field(default_factory=list)

    @property
    def commit(self) -> str:
        listing = json.dumps({p: hashlib.sha256(b).hexdigest() for p, b in sorted(self.files.items())})
        return hashlib.sha1(listing.encode()).hexdigest()

    def blob_id(self, path: str) -> str:
        """The git blob id, as the hub gives `oid` and the ETag of a file kept in git."""
        data = self.files[path]
        return hashlib.sha1(b"blob %d\x00" % len(data) + data).hexdigest()

    def entry(self, path: str) -> dict[str, object]:
        data = self.files[path]
        size = self.sizes.get(path, len(data))
        item: dict[str, object] = {"type": "file", "path": path, "size": size, "oid": self.blob_id(path)}
        if path.endswith(LFS_SUFFIXES):
            item["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": size, "pointerSize": 134}
        return item

    def __enter__(self) -> Hub:
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_HEAD(self) -> None:
                hub.answer(self, head=True)

            def do_GET(self) -> None:
                hub.answer(self, head=False)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def answer(self, h: BaseHTTPRequestHandler, head: bool) -> None:
        path = unquote(urlsplit(h.path).path)
        self.requests.append(
            {
                "method": h.command,
                "path": path,
                "range": h.headers.get("Range", ""),
                "auth": h.headers.get("Authorization", ""),
            }
        )
        if self.token and h.headers.get("Authorization") != f"Bearer {self.token}":
            return self.error(h, 401, "GatedRepo", f"Access to model {self.repo} is restricted. You must have access.")
        api = f"/api/models/{self.repo}/"
        if path.startswith(api + "revision/"):
            if not self.known(path[len(api + "revision/") :]):
                return self.error(h, 404, "RevisionNotFound", "Invalid rev id")
            body = {"_id": "0" * 24, "id": self.repo, "modelId": self.repo, "sha": self.commit, "private": False,
                    "siblings": [{"rfilename": p} for p in sorted(self.files)], "tags": []}  # fmt: skip
            return self.json(h, body)
        if path.startswith(api + "tree/"):
            if not self.known(path[len(api + "tree/") :]):
                return self.error(h, 404, "RevisionNotFound", "Invalid rev id")
            return self.json(h, [self.entry(p) for p in sorted(self.files)])
        resolve = f"/{self.repo}/resolve/"
        if path.startswith(resolve):
            revision, _, name = path[len(resolve) :].partition("/")
            if not self.known(revision):
                return self.error(h, 404, "RevisionNotFound", "Invalid rev id")
            if name not in self.files:
                return self.error(h, 404, "EntryNotFound", f"{name} does not exist")
            if name in self.broken and not head:
                return self.error(h, 503, "", "Service Unavailable")
            return self.file(h, name, head)
        return self.error(h, 404, "RepoNotFound", "Repository not found")

    def known(self, revision: str) -> bool:
        return revision in (self.revision, self.commit)

    def file(self, h: BaseHTTPRequestHandler, name: str, head: bool) -> None:
        data, entry = self.files[name], self.entry(name)
        start = 0
        if h.headers.get("Range", "").startswith("bytes="):
            start = int(h.headers["Range"][len("bytes=") :].split("-")[0])
        h.send_response(206 if start else 200)
        h.send_header("X-Repo-Commit", self.commit)
        lfs = entry.get("lfs")
        if isinstance(lfs, dict):
            h.send_header("X-Linked-Etag", f'"{lfs["oid"]}"')
            h.send_header("X-Linked-Size", str(len(data)))
        h.send_header("ETag", f'"{self.blob_id(name)}"')
        h.send_header("Accept-Ranges", "bytes")
        h.send_header("Content-Length", str(len(data) - start))
        if start:
            h.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        h.end_headers()
        if head:
            return
        body = data[start:]
        if name in self.cut:
            body = body[: self.cut.pop(name)]
            h.wfile.write(body)
            h.wfile.flush()
            h.close_connection = True
            return
        h.wfile.write(body)

    def json(self, h: BaseHTTPRequestHandler, body: object) -> None:
        data = json.dumps(body).encode()
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)

    def error(self, h: BaseHTTPRequestHandler, status: int, code: str, message: str) -> None:
        data = json.dumps({"error": message}).encode()
        h.send_response(status)
        if code:
            h.send_header("X-Error-Code", code)
        h.send_header("X-Error-Message", message)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        if h.command != "HEAD":
            h.wfile.write(data)
