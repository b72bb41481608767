"""A Flink SQL Gateway stand-in on a real socket, for what the real gateway cannot be made to do:
slow or malformed pages, a ``nextResultUri`` leading elsewhere, replayed recordings. The real
gateway (Flink 2.3.0's, ``tests/support/fixtures_sql_gateway.py``) is what ``tests/integration/test_sql_gateway_real.py``
tests against, and checks this stand-in's answers against.

Its wire format is the real one (v1–v4): ``POST /v{n}/sessions`` → ``{"sessionHandle"}``;
``POST …/sessions/{s}/statements`` → ``{"operationHandle"}``; ``GET …/operations/{o}/result/{token}
[?rowFormat=JSON]`` → ``{"resultType": "NOT_READY", "nextResultUri"}`` (the first ``not_ready``
fetches), PAYLOAD pages of ``page_size`` rows (``results``: ``columns``, ``rowFormat``, ``data``)
with ``nextResultUri`` (or ``next_result_uri`` when set: a misbehaving gateway), each after
``page_delay_s``, then EOS; ``DELETE …/sessions/{s}``; ``GET /v1/info``. A failed statement or an
unknown session is HTTP 500 ``{"errors": ["Internal server error.", "<Exception on server side: …
Java stack trace, innermost cause last … End of exception on server side>"]}``, from a recorded
real answer (``tests/fixtures/harvest/gateway-error.json``, ~7.5 KB).

What a statement returns comes from an executor: :class:`FlinkExecutor` runs it on a real PyFlink
``TableEnvironment`` (the gateway's planner), and :class:`RecordedExecutor` replays answers
captured from that executor.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Optional
from urllib.parse import parse_qs, urlparse

from tests.standins.http_stub import QuietHandler, send_json, serve, stop, url_of

ROOT = Path(__file__).resolve().parents[2]
ERROR_TEMPLATE = Path(__file__).parents[1] / "fixtures" / "harvest" / "gateway-error.json"
Columns = list[dict[str, Any]]
Rows = list[list[Any]]
Executor = Callable[[str], tuple[Columns, Rows]]


class StatementError(Exception):
    """The statement failed; the message is what the gateway reports."""


class FlinkExecutor:
    """Statements run on a real PyFlink TableEnvironment (one at a time), in a child process of the
    ingestion environment (this test run's has no pyflink): ``python -m tests.standins.sql_gateway``."""

    def __init__(self, setup: list[str]) -> None:
        from tests.support.envs import INGEST_PY

        self._lock = threading.Lock()
        self._child = subprocess.Popen([INGEST_PY, "-m", "tests.standins.sql_gateway", json.dumps(setup)],
                                       cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def __call__(self, statement: str) -> tuple[Columns, Rows]:
        with self._lock:
            assert self._child.stdin is not None and self._child.stdout is not None
            self._child.stdin.write(json.dumps(statement) + "\n")
            self._child.stdin.flush()
            line = self._child.stdout.readline()
        if not line:
            raise RuntimeError(f"the PyFlink child process ended (exit {self._child.wait()})")
        answer = json.loads(line)
        if "error" in answer:
            raise StatementError(answer["error"])
        return answer["columns"], answer["rows"]


def _serve_statements(setup: list[str]) -> None:
    """The child of :class:`FlinkExecutor`: one JSON statement a line in, one JSON answer a line out."""
    from pyflink.table import EnvironmentSettings, TableEnvironment

    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # whatever PyFlink prints goes to stderr, never into the answers
    env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    for statement in setup:
        env.execute_sql(statement)
    for line in sys.stdin:
        try:
            result = env.execute_sql(json.loads(line))
            schema = result.get_resolved_schema()
            columns = [{"name": name, "logicalType": {"type": str(t).split("(")[0], "nullable": True},
                        "comment": None} for name, t in zip(schema.get_column_names(), schema.get_column_data_types())]
            with result.collect() as rows:
                answer: dict[str, Any] = {"columns": columns,
                                          "rows": [[None if v is None else str(v) for v in row] for row in rows]}
        except Exception as exc:  # py4j wraps the Java exception: keep its "x.y.SomeException: …" line
            answer = {"error": _java_error(str(exc))}
        answers.write(json.dumps(answer) + "\n")
        answers.flush()


def _java_error(text: str) -> str:
    for line in text.splitlines():
        m = re.match(r"^[:\s]*((?:[\w$]+\.)+[\w$]*(?:Exception|Error)\b.*)", line)
        if m:
            return m.group(1)[:500]
    return text.strip()[:500] or "statement failed"


class RecordedExecutor:
    """Answers replayed from a JSON file: ``{statement: {"columns", "rows"} | {"error"}}``."""

    def __init__(self, answers: dict[str, Any]) -> None:
        self.answers = answers

    @classmethod
    def load(cls, path: Path) -> "RecordedExecutor":
        return cls(json.loads(path.read_text()))

    def __call__(self, statement: str) -> tuple[Columns, Rows]:
        answer = self.answers.get(statement)
        if answer is None:
            raise StatementError(f"org.apache.flink.table.api.ValidationException: no recorded answer for {statement!r}")
        if "error" in answer:
            raise StatementError(answer["error"])
        return answer["columns"], answer["rows"]


@dataclass
class _Operation:
    statement: str
    columns: Columns = field(default_factory=list)
    rows: Rows = field(default_factory=list)
    error: Optional[str] = None
    fetches: int = 0


@dataclass
class SqlGatewayStandIn:
    executor: Executor
    page_size: int = 2
    not_ready: int = 1  # the first N fetches of every operation answer NOT_READY
    page_delay_s: float = 0.0
    next_result_uri: Optional[str] = None
    statements: list[str] = field(default_factory=list)
    sessions: dict[str, dict[str, _Operation]] = field(default_factory=dict)
    closed: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    server: Optional[ThreadingHTTPServer] = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return url_of(self.server)

    def start(self) -> "SqlGatewayStandIn":
        standin = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                standin._handle(self, "GET")

            def do_POST(self) -> None:
                standin._handle(self, "POST")

            def do_DELETE(self) -> None:
                standin._handle(self, "DELETE")

        self.server = serve(Handler)
        return self

    def stop(self) -> None:
        if self.server is not None:
            stop(self.server)

    # --- protocol -----------------------------------------------------------------------

    def _handle(self, h: BaseHTTPRequestHandler, method: str) -> None:
        url = urlparse(h.path)
        query = parse_qs(url.query)
        length = int(h.headers.get("Content-Length") or 0)
        body = json.loads(h.rfile.read(length) or b"{}") if length else {}
        m = re.fullmatch(r"/(v[1-4])(/.*)", url.path)
        if not m:
            return self._send(h, 404, {"errors": ["Not found: " + url.path]})
        version, path = m.groups()
        if method == "GET" and path == "/info":
            return self._send(h, 200, {"productName": "Apache Flink", "version": "2.3.0"})
        if method == "POST" and path == "/sessions":
            handle = str(uuid.uuid4())
            with self.lock:
                self.sessions[handle] = {}
            return self._send(h, 200, {"sessionHandle": handle})
        s = re.fullmatch(r"/sessions/([^/]+)(/.*)?", path)
        if not s or s.group(1) not in self.sessions:
            return self._send(h, 500, server_error("org.apache.flink.table.gateway.api.utils.SqlGatewayException: "
                                                   f"Session '{s.group(1) if s else '?'}' does not exist."))
        handle, rest = s.group(1), s.group(2) or ""
        ops = self.sessions[handle]
        if method == "DELETE" and rest == "":
            with self.lock:
                self.closed.append(handle)
                del self.sessions[handle]
            return self._send(h, 200, {"status": "CLOSED"})
        if method == "POST" and rest == "/statements":
            statement = str(body.get("statement", ""))
            op = _Operation(statement)
            try:
                op.columns, op.rows = self.executor(statement)
            except StatementError as exc:
                op.error = str(exc)
            op_handle = str(uuid.uuid4())
            with self.lock:
                self.statements.append(statement)
                ops[op_handle] = op
            return self._send(h, 200, {"operationHandle": op_handle})
        r = re.fullmatch(r"/operations/([^/]+)/result/(\d+)", rest)
        if method == "GET" and r and r.group(1) in ops:
            return self._result(h, version, handle, r.group(1), ops[r.group(1)], int(r.group(2)), query)
        return self._send(h, 404, {"errors": [f"Not found: {method} {url.path}"]})

    def _result(self, h: BaseHTTPRequestHandler, version: str, session: str, op_handle: str, op: _Operation,
                token: int, query: dict) -> None:
        with self.lock:
            op.fetches += 1
            fetch = op.fetches
        if op.error is not None:
            return self._send(h, 500, server_error(op.error, op_handle))
        suffix = f"?rowFormat={query['rowFormat'][0]}" if "rowFormat" in query else ""
        base = f"/{version}/sessions/{session}/operations/{op_handle}/result"
        if fetch <= self.not_ready:
            return self._send(h, 200, {"resultType": "NOT_READY", "nextResultUri": f"{base}/{token}{suffix}"})
        time.sleep(self.page_delay_s)
        page = op.rows[token * self.page_size:(token + 1) * self.page_size]
        results: dict[str, Any] = {"columns": op.columns, "rowFormat": "JSON",
                                   "data": [{"kind": "INSERT", "fields": row} for row in page]}
        head = {"isQueryResult": False, "resultKind": "SUCCESS_WITH_CONTENT", "results": results}
        if token * self.page_size >= len(op.rows) and token > 0:
            return self._send(h, 200, {"resultType": "EOS", **head})
        return self._send(h, 200, {"resultType": "PAYLOAD", **head,
                                   "nextResultUri": self.next_result_uri or f"{base}/{token + 1}{suffix}"})

    @staticmethod
    def _send(h: BaseHTTPRequestHandler, status: int, payload: Any) -> None:
        send_json(h, status, payload, "application/json; charset=UTF-8")


def server_error(cause: str, operation: str = "") -> dict[str, list[str]]:
    """The gateway's HTTP 500 answer: a recorded real one, with ``cause`` as its innermost cause."""
    recorded = json.loads(ERROR_TEMPLATE.read_text())["errors"]
    return {"errors": [recorded[0], recorded[1].replace("{operation}", operation or str(uuid.uuid4()))
                       .replace("{cause}", cause)]}


if __name__ == "__main__":
    _serve_statements(json.loads(sys.argv[1]))
