"""The plumbing every small stand-in server in tests/ shares: a quiet handler, a JSON answer, serve,
stop, and a server that gives every request the same answer."""

from __future__ import annotations

import json
import socket
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Optional


class QuietHandler(BaseHTTPRequestHandler):
    """No access log on stderr; TCP_NODELAY so small answers are not held back by Nagle."""

    def log_message(self, *args: Any) -> None:
        pass

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def send_json(handler: BaseHTTPRequestHandler, status: int, payload: Any,
              content_type: str = "application/json") -> None:
    """Answer ``payload`` as a JSON document with ``status``."""
    data = json.dumps(payload).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


def serve(handler: type[BaseHTTPRequestHandler]) -> ThreadingHTTPServer:
    """Serve ``handler`` on a free 127.0.0.1 port in a daemon thread."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return server


def url_of(server: ThreadingHTTPServer) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"


def stop(server: ThreadingHTTPServer) -> None:
    server.shutdown()
    server.server_close()


@dataclass(frozen=True)
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


class FixedServer:
    """Answers every request with one status, headers and body (e.g. a redirect, or a 401) and
    records what it received."""

    def __init__(self, status: int, headers: tuple[tuple[str, str], ...] = (), body: bytes = b"") -> None:
        self.status, self.headers, self.body = status, headers, body
        self.received: list[Received] = []
        self.server: Optional[ThreadingHTTPServer] = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return url_of(self.server)

    def start(self) -> "FixedServer":
        fixed = self

        class Handler(QuietHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                fixed.received.append(Received(self.command, self.path, dict(self.headers.items()),
                                               self.rfile.read(length)))
                self.send_response(fixed.status)
                for k, v in fixed.headers:
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(fixed.body)))
                self.end_headers()
                self.wfile.write(fixed.body)

            do_GET = do_POST = do_PUT = do_DELETE = _answer

        self.server = serve(Handler)
        return self

    def stop(self) -> None:
        if self.server is not None:
            stop(self.server)
