"""A tiny registry in this process (http.server on 127.0.0.1) for the watch tests: what
the registry client relies on, `GET /v2/<name>/tags/list` paginated with `?n=&last=`
and a relative `Link: <...>; rel="next"`, and, when asked, the Bearer challenge ->
`GET /token?service=&scope=` (optionally with basic auth) -> retry with
`Authorization: Bearer`. `serve` runs one; tests/unit/conftest.py's `registry` fixture
hands it to a test."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from harness.watch import RepoRef, parse_repo

NAME = "harness-test/base"
TOKEN = "tok-123"


@dataclass
class Registry:
    """What the fake serves and what it saw."""

    tags: list[str] = field(default_factory=list)
    page: int = 2                       # the server's own page limit
    auth: str | None = None             # None | "bearer" | "basic"
    token_field: str = "token"
    user: tuple[str, str] | None = None  # required basic credentials at /token
    status: int | None = None           # force this status on tags/list
    body: bytes | None = None           # force this body on tags/list
    seen: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    port: int = 0

    @property
    def repo(self) -> RepoRef:
        return parse_repo(f"127.0.0.1:{self.port}/{NAME}")

    def paths(self, prefix: str) -> list[str]:
        return [p for p, _ in self.seen if p.startswith(prefix)]


def handler(reg: Registry) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _send(self, code: int, body: Any, headers: dict[str, str] | None = None) -> None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            self.send_response(code)
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            reg.seen.append((self.path, dict(self.headers)))
            url = urlsplit(self.path)
            q = {k: v[0] for k, v in parse_qs(url.query).items()}
            if url.path == "/token":
                self._token(q)
            elif url.path == f"/v2/{NAME}/tags/list":
                self._tags(q)
            else:
                self._send(404, {"errors": [{"code": "NAME_UNKNOWN",
                                             "message": "repository name not known to registry"}]})

        def _token(self, q: dict[str, str]) -> None:
            if reg.user is not None:
                want = base64.b64encode(":".join(reg.user).encode()).decode()
                if self.headers.get("Authorization") != f"Basic {want}":
                    self._send(401, {"details": "incorrect username or password"})
                    return
            self._send(200, {reg.token_field: TOKEN, "expires_in": 300})

        def _tags(self, q: dict[str, str]) -> None:
            if reg.auth == "bearer" and self.headers.get("Authorization") != f"Bearer {TOKEN}":
                realm = f"http://127.0.0.1:{reg.port}/token"
                self._send(401, {"errors": [{"code": "UNAUTHORIZED", "message": "auth"}]}, {
                    "WWW-Authenticate": f'Bearer realm="{realm}",service="fake-registry",'
                                        f'scope="repository:{NAME}:pull"'})
                return
            if reg.auth == "basic" and not (self.headers.get("Authorization") or "").startswith(
                    "Basic "):
                self._send(401, {"errors": []}, {"WWW-Authenticate": 'Basic realm="fake"'})
                return
            if reg.status is not None or reg.body is not None:
                self._send(reg.status or 200, reg.body if reg.body is not None else b"{}")
                return
            n = min(int(q.get("n", reg.page)), reg.page)
            start = reg.tags.index(q["last"]) + 1 if "last" in q else 0
            chunk = reg.tags[start:start + n]
            headers = {}
            if start + n < len(reg.tags):
                headers["Link"] = f'</v2/{NAME}/tags/list?last={chunk[-1]}&n={n}>; rel="next"'
            self._send(200, {"name": NAME, "tags": chunk}, headers)

    return Handler


@contextmanager
def serve() -> Iterator[Registry]:
    """A registry on a free port of 127.0.0.1 until the block ends."""
    reg = Registry()
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler(reg))
    reg.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02},
                              daemon=True)
    thread.start()
    try:
        yield reg
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
