"""The Flink JobManager REST client: what the harvester reads, typed at the edge.

Endpoints: ``/v1/config``, ``/v1/jobs/overview``, ``/v1/jobs/{id}`` (with its plan; ``/plan`` when
a JobManager leaves it out), ``/config``, ``/checkpoints``, ``/checkpoints/config``,
``/exceptions`` and, for live jobs, the vertex metrics. Retries, backoff and timeouts come from
:mod:`lakeflow.http` (5xx, 429 and connection errors are retried; an answer has a wall-clock
deadline and a size limit); every payload becomes a frozen dataclass here, and every malformed
answer (also NaN, 1e400 or nesting deeper than the JSON decoder goes) becomes a
:class:`FlinkRestError` naming the URL.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import requests

from lakeflow.errors import LakeflowError
from lakeflow.secret import Secret

T = TypeVar("T")
MAX_BODY_BYTES = 64 * 1024 * 1024  # a JobManager answer larger than this is refused, not buffered
ERROR_BODY_BYTES = 64 * 1024  # of an error answer: Flink's carry a Java stack trace (~8 KB), cause last
LIVE_STATES = frozenset({"INITIALIZING", "CREATED", "RUNNING", "FAILING", "CANCELLING", "RESTARTING", "RECONCILING"})
# Task-level I/O counters of a vertex (aggregated over its subtasks) for live jobs.
VERTEX_METRICS = ("numRecordsIn", "numRecordsOut", "numBytesIn", "numBytesOut")


class FlinkRestError(LakeflowError, RuntimeError):
    """A JobManager (or SQL Gateway) request failed or answered something unusable; ``status`` is
    the HTTP status when there was one."""

    def __init__(self, message: str, status: int | None = None, detail: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.detail = detail or message  # the server's reason alone (no URL)


@dataclass(frozen=True)
class Auth:
    """Bearer token or HTTP basic credentials (never both); secrets stay wrapped."""

    token: Secret | None = None
    username: str | None = None
    password: Secret | None = None

    def __post_init__(self) -> None:
        if self.token and (self.username or self.password):
            raise ValueError("Flink auth: give a bearer token or username/password, not both")
        if bool(self.username) != bool(self.password):
            raise ValueError("Flink auth: username and password go together")

    def apply(self, session: requests.Session) -> None:
        if self.token:
            session.headers["Authorization"] = f"Bearer {self.token.reveal()}"
        elif self.username and self.password:
            session.auth = (self.username, self.password.reveal())


@dataclass(frozen=True)
class Connection:
    """How to reach a REST endpoint: URL, auth, TLS, timeouts and retries. ``timeout_s`` bounds
    each read, ``deadline_s`` a whole answer (however slowly it trickles in)."""

    url: str
    auth: Auth = Auth()
    verify_ssl: bool = True
    timeout_s: float = 30.0
    deadline_s: float = 120.0
    max_retries: int = 3
    backoff_s: float = 0.5


def new_session(conn: Connection, retry_500: bool = True) -> requests.Session:
    """The one place a harvester HTTP session is made (lakeflow.http: retries, backoff, timeout).
    ``retry_500=False`` for the SQL Gateway, whose 500 is a failed statement's answer."""
    from lakeflow.http import RETRY_STATUSES, HttpOptions
    from lakeflow.http import new_session as http_session

    statuses = RETRY_STATUSES if retry_500 else RETRY_STATUSES - {500}
    session = http_session(
        HttpOptions(
            timeout=conn.timeout_s,
            max_retries=conn.max_retries,
            backoff=conn.backoff_s,
            backoff_max=10.0,
            jitter=0.1,
            retry_after_max=30,
            verify=conn.verify_ssl,
            retry_statuses=statuses,
        )
    )
    conn.auth.apply(session)
    return session


def read_json(response: requests.Response, what: str, deadline: float) -> Any:
    """The JSON body of a successful answer, read by ``deadline`` (``time.monotonic()``) and
    bounded in size, strictly parsed; a clear error otherwise."""
    from lakeflow.http import AnswerRefused, read_body

    try:
        if response.status_code >= 400:
            detail = _error_text(read_body(response, deadline, ERROR_BODY_BYTES, cut=True).decode("utf-8", "replace"))
            raise FlinkRestError(f"{what}: HTTP {response.status_code}: {detail}", response.status_code, detail)
        body = read_body(response, deadline, MAX_BODY_BYTES)
    except AnswerRefused as exc:
        raise FlinkRestError(f"{what}: {exc}") from None
    except requests.RequestException as exc:
        raise FlinkRestError(f"{what}: reading the answer failed: {exc}") from exc
    try:
        return strict_json(body)
    except ValueError as exc:
        kind = response.headers.get("Content-Type", "unknown content type")
        raise FlinkRestError(
            f"{what}: answer is not JSON ({kind}, {len(body)} bytes; {exc}): {body[:120].decode('utf-8', 'replace')!r}"
        ) from None


def strict_json(text: str | bytes) -> Any:
    """``json.loads`` refusing what Python accepts but JSON does not: NaN, Infinity, numbers beyond
    a float (1e400); nesting too deep for the decoder is a ``ValueError`` too."""
    try:
        return json.loads(text, parse_constant=_not_a_number, parse_float=_finite)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def _not_a_number(name: str) -> float:
    raise ValueError(f"{name} is not a JSON number")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text[:40]} does not fit a float")
    return value


def _error_text(body: str) -> str:
    """Flink's ``{"errors": [...]}``: the innermost ``Caused by`` line, else the first line."""
    try:
        errors = strict_json(body).get("errors")
    except (ValueError, AttributeError):
        errors = None
    if not isinstance(errors, list) or not errors:
        return body.strip()[:300] or "(empty body)"
    lines = [line.strip() for e in errors for line in str(e).splitlines() if line.strip()]
    causes = [line[len("Caused by: ") :] for line in lines if line.startswith("Caused by: ")]
    return (causes[-1] if causes else lines[0] if lines else "(no error text)")[:300]


# --- typed payloads -----------------------------------------------------------------------


@dataclass(frozen=True)
class ClusterConfig:
    flink_version: str
    flink_revision: str


@dataclass(frozen=True)
class JobSummary:
    jid: str
    name: str
    state: str
    job_type: str | None  # STREAMING / BATCH (absent before Flink 1.20)
    start_time: int
    end_time: int  # -1 while live


@dataclass(frozen=True)
class IOMetrics:
    records_in: int = 0
    records_out: int = 0
    bytes_in: int = 0
    bytes_out: int = 0

    def __add__(self, other: IOMetrics) -> IOMetrics:
        return IOMetrics(
            self.records_in + other.records_in,
            self.records_out + other.records_out,
            self.bytes_in + other.bytes_in,
            self.bytes_out + other.bytes_out,
        )


@dataclass(frozen=True)
class Vertex:
    id: str
    name: str
    parallelism: int
    status: str
    io: IOMetrics


@dataclass(frozen=True)
class PlanNode:
    id: str
    description: str
    parallelism: int
    inputs: tuple[str, ...]  # ids of upstream plan nodes


@dataclass(frozen=True)
class JobDetail:
    jid: str
    name: str
    state: str
    job_type: str | None
    start_time: int
    end_time: int
    max_parallelism: int
    vertices: tuple[Vertex, ...]
    plan: tuple[PlanNode, ...] | None  # None when the answer carried no plan
    timestamps: Mapping[str, int]  # when the job last entered each state (0: never)

    @property
    def live(self) -> bool:
        return self.state in LIVE_STATES

    @property
    def ever_failed(self) -> bool:
        """Whether the job ever failed or restarted (else its exception history is empty)."""
        return self.state in ("FAILED", "FAILING", "RESTARTING") or any(
            self.timestamps.get(s, 0) > 0 for s in ("FAILING", "RESTARTING", "FAILED")
        )


@dataclass(frozen=True)
class JobConfig:
    user_config: Mapping[str, str]
    restart_strategy: str


@dataclass(frozen=True)
class CheckpointStats:
    completed: int
    failed: int
    restored: int
    latest_completed_ms: int | None


@dataclass(frozen=True)
class CheckpointConfig:
    mode: str
    interval_ms: int | None  # None: checkpointing disabled
    state_backend: str
    storage: str
    externalized: bool


@dataclass(frozen=True)
class Failure:
    timestamp: int
    exception: str
    root_cause: str  # the innermost "Caused by" (or a concurrent task failure), one line


@dataclass(frozen=True)
class ExceptionHistory:
    failures: tuple[Failure, ...]  # newest first, as Flink lists them
    truncated: bool


def _get(d: Any, key: str, kind: Callable[[Any], T], what: str, default: Any = ...) -> T:
    if not isinstance(d, Mapping):
        raise FlinkRestError(f"{what}: expected a JSON object, got {type(d).__name__}")
    if key not in d or d[key] is None:
        if default is ...:
            raise FlinkRestError(f"{what}: field {key!r} missing")
        return default
    try:
        return kind(d[key])
    except (TypeError, ValueError) as exc:
        raise FlinkRestError(f"{what}: field {key!r} has an unexpected value {d[key]!r}") from exc


def _list(d: Any, key: str, what: str) -> list:
    value = _get(d, key, lambda v: v, what, [])
    if not isinstance(value, list):
        raise FlinkRestError(f"{what}: field {key!r} should be a list")
    return value


def _int(v: Any) -> int:
    return int(v) if not isinstance(v, str) or v.lstrip("-").isdigit() else 0  # "NaN" → 0


def parse_cluster_config(d: Any) -> ClusterConfig:
    w = "GET /v1/config"
    return ClusterConfig(_get(d, "flink-version", str, w), _get(d, "flink-revision", str, w, ""))


def parse_overview(d: Any) -> tuple[JobSummary, ...]:
    w = "GET /v1/jobs/overview"
    return tuple(
        JobSummary(
            jid=_get(j, "jid", str, w),
            name=_get(j, "name", str, w),
            state=_get(j, "state", str, w),
            job_type=_get(j, "jobType", str, w, None),
            start_time=_get(j, "start-time", int, w, -1),
            end_time=_get(j, "end-time", int, w, -1),
        )
        for j in _list(d, "jobs", w)
    )


def parse_plan(d: Any, what: str) -> tuple[PlanNode, ...]:
    return tuple(
        PlanNode(
            id=_get(n, "id", str, what),
            description=_get(n, "description", str, what, ""),
            parallelism=_get(n, "parallelism", int, what, 0),
            inputs=tuple(_get(i, "id", str, what) for i in _list(n, "inputs", what)),
        )
        for n in _list(d, "nodes", what)
    )


def parse_job(d: Any) -> JobDetail:
    w = f"GET /v1/jobs/{d.get('jid') if isinstance(d, Mapping) else '?'}"
    vertices = []
    for v in _list(d, "vertices", w):
        m = _get(v, "metrics", dict, w, {})
        vertices.append(
            Vertex(
                id=_get(v, "id", str, w),
                name=_get(v, "name", str, w),
                parallelism=_get(v, "parallelism", int, w, 0),
                status=_get(v, "status", str, w, ""),
                io=IOMetrics(
                    _int(m.get("read-records", 0)),
                    _int(m.get("write-records", 0)),
                    _int(m.get("read-bytes", 0)),
                    _int(m.get("write-bytes", 0)),
                ),
            )
        )
    plan = d.get("plan")
    return JobDetail(
        jid=_get(d, "jid", str, w),
        name=_get(d, "name", str, w),
        state=_get(d, "state", str, w),
        job_type=_get(d, "job-type", str, w, None),
        start_time=_get(d, "start-time", int, w, -1),
        end_time=_get(d, "end-time", int, w, -1),
        max_parallelism=_get(d, "maxParallelism", int, w, -1),
        vertices=tuple(vertices),
        plan=parse_plan(plan, w + " plan") if isinstance(plan, Mapping) else None,
        timestamps={str(k): _int(v) for k, v in _get(d, "timestamps", dict, w, {}).items()},
    )


def parse_job_config(d: Any, jid: str) -> JobConfig:
    w = f"GET /v1/jobs/{jid}/config"
    ec = _get(d, "execution-config", dict, w, {})
    user = _get(ec, "user-config", dict, w, {})
    return JobConfig(
        user_config={str(k): str(v) for k, v in user.items()}, restart_strategy=_get(ec, "restart-strategy", str, w, "")
    )


def parse_checkpoints(d: Any, jid: str) -> CheckpointStats:
    w = f"GET /v1/jobs/{jid}/checkpoints"
    counts = _get(d, "counts", dict, w, {})
    latest = _get(d, "latest", dict, w, {})
    completed = latest.get("completed") if isinstance(latest, Mapping) else None
    return CheckpointStats(
        completed=_get(counts, "completed", int, w, 0),
        failed=_get(counts, "failed", int, w, 0),
        restored=_get(counts, "restored", int, w, 0),
        latest_completed_ms=_get(completed, "latest_ack_timestamp", int, w, None)
        if isinstance(completed, Mapping)
        else None,
    )


def parse_checkpoint_config(d: Any, jid: str) -> CheckpointConfig:
    w = f"GET /v1/jobs/{jid}/checkpoints/config"
    interval = _get(d, "interval", int, w, None)
    ext = _get(d, "externalization", dict, w, {})
    return CheckpointConfig(
        mode=_get(d, "mode", str, w, ""),
        interval_ms=None if interval is None or interval >= 2**63 - 1 else interval,
        state_backend=_get(d, "state_backend", str, w, ""),
        storage=_get(d, "checkpoint_storage", str, w, ""),
        externalized=bool(ext.get("enabled", False)),
    )


def parse_exceptions(d: Any, jid: str) -> ExceptionHistory:
    w = f"GET /v1/jobs/{jid}/exceptions"
    history = _get(d, "exceptionHistory", dict, w, {})
    failures = []
    for e in _list(history, "entries", w):
        trace = _get(e, "stacktrace", str, w, "")
        first = trace.splitlines()[0] if trace else _get(e, "exceptionName", str, w, "")
        causes = [line[len("Caused by: ") :] for line in trace.splitlines() if line.startswith("Caused by: ")]
        concurrent = [
            c.get("stacktrace", "").splitlines()[0]
            for c in _list(e, "concurrentExceptions", w)
            if isinstance(c, Mapping) and c.get("stacktrace")
        ]
        root = causes[-1] if causes else (concurrent[0] if concurrent else first)
        failures.append(
            Failure(
                timestamp=_get(e, "timestamp", int, w, 0), exception=first.strip()[:500], root_cause=root.strip()[:500]
            )
        )
    return ExceptionHistory(failures=tuple(failures), truncated=bool(history.get("truncated", False)))


def parse_vertex_metrics(d: Any, what: str) -> IOMetrics:
    if not isinstance(d, list):
        raise FlinkRestError(f"{what}: expected a JSON list of metrics")
    values = {m.get("id"): _int(float(m.get("sum", 0))) for m in d if isinstance(m, Mapping)}
    return IOMetrics(
        values.get("numRecordsIn", 0),
        values.get("numRecordsOut", 0),
        values.get("numBytesIn", 0),
        values.get("numBytesOut", 0),
    )


# --- the client -----------------------------------------------------------------------------


class FlinkRestClient:
    """Typed reads from one JobManager; safe to share between threads (one pooled session)."""

    def __init__(self, conn: Connection, session: requests.Session | None = None) -> None:
        self.conn = conn
        self.base = conn.url.rstrip("/")
        self._session = session or new_session(conn)

    def close(self) -> None:
        self._session.close()

    def get(self, path: str) -> Any:
        """GET ``/v1{path}`` → parsed JSON (retried by the session on 5xx/429/connection errors)."""
        url = f"{self.base}/v1{path}"
        deadline = time.monotonic() + self.conn.deadline_s
        try:
            response = self._session.get(url, stream=True, timeout=self.conn.timeout_s)
        except requests.RequestException as exc:
            raise FlinkRestError(f"GET {url}: {_reason(exc)}") from exc
        return read_json(response, f"GET {url}", deadline)

    def _read(self, path: str, parse: Callable[[Any], T]) -> T:
        """GET ``path`` typed by ``parse``: a payload it cannot take is a FlinkRestError too."""
        payload = self.get(path)
        try:
            return parse(payload)
        except (TypeError, ValueError, AttributeError, LookupError, OverflowError, RecursionError) as exc:
            raise FlinkRestError(
                f"GET {self.base}/v1{path}: unusable answer ({type(exc).__name__}: {str(exc)[:200]})"
            ) from None

    def _unless_404(self, path: str, parse: Callable[[Any], T]) -> T | None:
        try:
            return self._read(path, parse)
        except FlinkRestError as exc:
            if exc.status == 404:
                return None
            raise

    def cluster_config(self) -> ClusterConfig:
        return self._read("/config", parse_cluster_config)

    def jobs(self) -> tuple[JobSummary, ...]:
        return self._read("/jobs/overview", parse_overview)

    def job(self, jid: str) -> JobDetail:
        detail = self._read(f"/jobs/{jid}", parse_job)
        if detail.plan is None:  # some JobManagers leave the plan out of the job details
            path = f"/jobs/{jid}/plan"
            detail = replace(detail, plan=self._read(path, lambda p: parse_plan(p.get("plan", p), f"GET /v1{path}")))
        return detail

    def job_config(self, jid: str) -> JobConfig:
        return self._read(f"/jobs/{jid}/config", lambda d: parse_job_config(d, jid))

    def checkpoints(self, jid: str) -> CheckpointStats | None:
        """None when checkpointing is not enabled (Flink answers 404, e.g. for batch jobs)."""
        return self._unless_404(f"/jobs/{jid}/checkpoints", lambda d: parse_checkpoints(d, jid))

    def checkpoint_config(self, jid: str) -> CheckpointConfig | None:
        """None when checkpointing is not enabled."""
        return self._unless_404(f"/jobs/{jid}/checkpoints/config", lambda d: parse_checkpoint_config(d, jid))

    def exceptions(self, jid: str) -> ExceptionHistory:
        return self._read(f"/jobs/{jid}/exceptions", lambda d: parse_exceptions(d, jid))

    def vertex_io(self, jid: str, vid: str) -> IOMetrics:
        """Task I/O counters of a live vertex, summed over its subtasks."""
        path = f"/jobs/{jid}/vertices/{vid}/subtasks/metrics?get={','.join(VERTEX_METRICS)}&agg=sum"
        return self._read(path, lambda d: parse_vertex_metrics(d, f"GET {path}"))


def _reason(exc: requests.RequestException) -> str:
    return f"{type(exc).__name__}: {str(exc)[:400]}"
