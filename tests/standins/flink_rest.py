"""A Flink JobManager REST stub on a real socket: recorded answers, and faults on demand.

Routes map a path (with its query string) to a list of :class:`Answer` s served in turn (the last
one repeats). An answer is a status + JSON (or raw bytes), optionally delayed, truncated (the
connection closes before ``Content-Length`` bytes), huge (``size`` bytes of a valid JSON
array streamed) or trickled (one byte every ``trickle_s`` seconds). Every request is recorded with its headers.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Optional

from tests.standins.http_stub import QuietHandler, serve, stop, url_of


@dataclass(frozen=True)
class Answer:
    status: int = 200
    body: Any = None  # JSON-able, or bytes sent as they are
    delay_s: float = 0.0
    truncate: bool = False
    huge_bytes: int = 0
    trickle_s: float = 0.0
    headers: tuple[tuple[str, str], ...] = ()


@dataclass
class FlinkRestStub:
    routes: dict[str, list[Answer]] = field(default_factory=dict)
    requests: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    server: Optional[ThreadingHTTPServer] = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return url_of(self.server)

    def route(self, path: str, *answers: Answer) -> None:
        with self.lock:
            self.routes[path] = list(answers)

    def load_recording(self, directory: Path) -> None:
        """Serve a recording: ``index.json`` maps paths to files holding the recorded bodies."""
        index = json.loads((directory / "index.json").read_text())
        for path, entry in index.items():
            body = json.loads((directory / entry["file"]).read_text())
            self.route(path, Answer(entry.get("status", 200), body))

    def count(self, path: str) -> int:
        with self.lock:
            return sum(1 for p, _ in self.requests if p == path)

    def start(self) -> "FlinkRestStub":
        stub = self

        class Handler(QuietHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                stub._serve(self)

        self.server = serve(Handler)
        return self

    def stop(self) -> None:
        if self.server is not None:
            stop(self.server)

    def _serve(self, h: BaseHTTPRequestHandler) -> None:
        path = h.path[3:] if h.path.startswith("/v1") else h.path
        with self.lock:
            self.requests.append((path, {k: v for k, v in h.headers.items()}))
            queue = self.routes.get(path)
            answer = (queue.pop(0) if len(queue) > 1 else queue[0]) if queue else None
        if answer is None:
            answer = Answer(404, {"errors": [f"Not found: {h.path}"]})
        if answer.delay_s:
            time.sleep(answer.delay_s)
        if answer.huge_bytes:
            return self._huge(h, answer.huge_bytes)
        data = answer.body if isinstance(answer.body, bytes) else json.dumps(answer.body).encode()
        h.send_response(answer.status)
        h.send_header("Content-Type", "application/json; charset=UTF-8")
        for k, v in answer.headers:
            h.send_header(k, v)
        h.send_header("Content-Length", str(len(data)))
        if answer.truncate:
            h.send_header("Connection", "close")
        h.end_headers()
        try:
            if answer.trickle_s:
                for i in range(len(data)):
                    h.wfile.write(data[i:i + 1])
                    h.wfile.flush()
                    time.sleep(answer.trickle_s)
            else:
                h.wfile.write(data[: len(data) // 2] if answer.truncate else data)
                h.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass
        if answer.truncate:
            h.close_connection = True

    @staticmethod
    def _huge(h: BaseHTTPRequestHandler, size: int) -> None:
        chunk = b"1," * 32768
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(size))
        h.end_headers()
        sent = 0
        try:
            h.wfile.write(b"[")
            sent = 1
            while sent + len(chunk) < size - 2:
                h.wfile.write(chunk)
                sent += len(chunk)
            h.wfile.write(b"1" + b" " * (size - sent - 2) + b"]")
        except (BrokenPipeError, ConnectionResetError):
            pass
