"""The Flink JobManager REST client: what the harvester reads, typed at the edge.

Endpoints: ``/v1/config``, ``/v1/jobs/overview``, ``/v1/jobs/{id}`` (with its plan; ``/plan`` when
a JobManager leaves it out), ``/config``, ``/checkpoints``, ``/checkpoints/config``,
``/exceptions`` and, for live jobs, the vertex metrics. Retries, backoff and timeouts come from
:mod:`lakeflow.http` (5xx, 429 and connection errors are retried; an answer has a wall-clock
deadline and a size limit). Every answer is validated by a pydantic model of what Flink writes
(the fields lakeflow reads; others ignored) and becomes a frozen dataclass here; every malformed
answer (also NaN, 1e400 or nesting deeper than the JSON decoder goes) becomes one
:class:`FlinkRestError` naming the URL and the field.
"""

from __future__ import annotations

import json
import math
from base64 import b64encode
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, TypeAdapter, ValidationError

from lakeflow.errors import LakeflowError
from lakeflow.secret import Secret

if TYPE_CHECKING:
    from lakeflow.http import Pool

T = TypeVar("T")
JSON = {"Content-Type": "application/json"}
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

    def headers(self) -> dict[str, str]:
        """The ``Authorization`` header of these credentials; none without."""
        if self.token:
            return {"Authorization": f"Bearer {self.token.reveal()}"}
        if self.username and self.password:
            basic = b64encode(f"{self.username}:{self.password.reveal()}".encode("latin-1")).decode()
            return {"Authorization": f"Basic {basic}"}  # as urllib3's make_headers writes it
        return {}


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


def new_pool(conn: Connection, retry_500: bool = True) -> Pool:
    """The one place a harvester's HTTP pool is made (lakeflow.http: retries, backoff, timeout,
    answers bounded, the environment's proxy read once). ``retry_500=False`` for the SQL Gateway,
    whose 500 is a failed statement's answer."""
    from lakeflow.http import RETRY_STATUSES, HttpOptions, Pool

    statuses = RETRY_STATUSES if retry_500 else RETRY_STATUSES - {500}
    options = HttpOptions(
        timeout=conn.timeout_s,
        max_retries=conn.max_retries,
        backoff=conn.backoff_s,
        backoff_max=10.0,
        jitter=0.1,
        retry_after_max=30,
        verify=conn.verify_ssl,
        retry_statuses=statuses,
        deadline=conn.deadline_s,
    )
    return Pool(conn.url, options, conn.auth.headers(), MAX_BODY_BYTES, ERROR_BODY_BYTES)


def call(pool: Pool, what: str, method: str, url: str, body: Any = None, deadline: float = math.inf) -> Any:
    """``method url`` (``body`` sent as JSON) → the JSON of its successful answer, read by
    ``deadline`` (``time.monotonic()``) and bounded in size, strictly parsed; any failure a
    :class:`FlinkRestError` starting with ``what`` (its reason at most ~400 characters)."""
    from lakeflow.http import AnswerRefused, RedirectRefused, RequestFailed, failure

    data = None if body is None else json.dumps(body, allow_nan=False).encode()
    try:
        reply = pool.request(method, url, data, None if body is None else JSON, deadline)
    except (RequestFailed, RedirectRefused, AnswerRefused) as exc:
        raise FlinkRestError(f"{what}: {failure(exc)[:420]}") from exc
    if reply.status >= 400:
        detail = _error_text(reply.body.decode("utf-8", "replace"))
        raise FlinkRestError(f"{what}: HTTP {reply.status}: {detail}", reply.status, detail)
    try:
        return strict_json(reply.body)
    except ValueError as exc:
        kind = reply.content_type or "unknown content type"
        raise FlinkRestError(
            f"{what}: answer is not JSON ({kind}, {len(reply.body)} bytes; {exc}): "
            f"{reply.body[:120].decode('utf-8', 'replace')!r}"
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


# --- the answers as Flink writes them (pydantic) ---------------------------------------------
# Only the fields lakeflow reads are modelled; the others are ignored, as in the Lakekeeper answers
# (lakeflow.catalog.wire): Flink adds fields across versions. A missing or mistyped field is a
# ValidationError, which the client reports as a FlinkRestError naming the URL and the field.


def _not_measured(value: Any) -> Any:
    """Flink writes "NaN" for a counter it has not measured: 0, as the harvest has always shown it."""
    return 0 if value == "NaN" else value


Count = Annotated[int, BeforeValidator(_not_measured)]


class _Payload(BaseModel):
    """A JobManager answer: Flink's field names, unknown fields ignored, immutable."""

    model_config = ConfigDict(extra="ignore", frozen=True)


class _ClusterConfig(_Payload):
    flink_version: str = Field(alias="flink-version")
    flink_revision: str = Field("", alias="flink-revision")


class _JobSummary(_Payload):
    jid: str
    name: str
    state: str
    job_type: str | None = Field(None, alias="jobType")
    start_time: int = Field(-1, alias="start-time")
    end_time: int = Field(-1, alias="end-time")


class _Overview(_Payload):
    jobs: list[_JobSummary] = []


class _PlanInput(_Payload):
    id: str


class _PlanNode(_Payload):
    id: str
    description: str = ""
    parallelism: int = 0
    inputs: list[_PlanInput] = []


class _Plan(_Payload):
    nodes: list[_PlanNode] = []


class _JobPlan(_Payload):
    plan: _Plan


class _VertexCounters(_Payload):
    read_records: Count = Field(0, alias="read-records")
    write_records: Count = Field(0, alias="write-records")
    read_bytes: Count = Field(0, alias="read-bytes")
    write_bytes: Count = Field(0, alias="write-bytes")


class _Vertex(_Payload):
    id: str
    name: str
    parallelism: int = 0
    status: str = ""
    metrics: _VertexCounters = _VertexCounters()


class _Job(_Payload):
    jid: str
    name: str
    state: str
    job_type: str | None = Field(None, alias="job-type")
    start_time: int = Field(-1, alias="start-time")
    end_time: int = Field(-1, alias="end-time")
    max_parallelism: int = Field(-1, alias="maxParallelism")
    vertices: list[_Vertex] = []
    plan: _Plan | None = None
    timestamps: dict[str, Count] = {}


class _ExecutionConfig(_Payload):
    user_config: dict[str, str] = Field({}, alias="user-config")
    restart_strategy: str = Field("", alias="restart-strategy")


class _JobConfig(_Payload):
    execution_config: _ExecutionConfig = Field(_ExecutionConfig(), alias="execution-config")


class _CheckpointCounts(_Payload):
    completed: int = 0
    failed: int = 0
    restored: int = 0


class _CompletedCheckpoint(_Payload):
    latest_ack_timestamp: int | None = None


class _LatestCheckpoints(_Payload):
    completed: _CompletedCheckpoint | None = None


class _Checkpoints(_Payload):
    counts: _CheckpointCounts = _CheckpointCounts()
    latest: _LatestCheckpoints | None = None


class _Externalization(_Payload):
    enabled: bool = False


class _CheckpointConfig(_Payload):
    mode: str = ""
    interval: int | None = None  # Long.MAX_VALUE: checkpointing disabled
    state_backend: str = ""
    checkpoint_storage: str = ""
    externalization: _Externalization = _Externalization()


class _ConcurrentException(_Payload):
    stacktrace: str = ""


class _ExceptionEntry(_Payload):
    timestamp: int = 0
    exception_name: str = Field("", alias="exceptionName")
    stacktrace: str = ""
    concurrent_exceptions: list[_ConcurrentException] = Field([], alias="concurrentExceptions")


class _ExceptionHistory(_Payload):
    entries: list[_ExceptionEntry] = []
    truncated: bool = False


class _Exceptions(_Payload):
    exception_history: _ExceptionHistory = Field(_ExceptionHistory(), alias="exceptionHistory")


class _Metric(_Payload):
    id: str
    sum: float = 0.0


_METRICS = TypeAdapter(list[_Metric])


def parse_cluster_config(payload: Any) -> ClusterConfig:
    c = _ClusterConfig.model_validate(payload)
    return ClusterConfig(c.flink_version, c.flink_revision)


def parse_overview(payload: Any) -> tuple[JobSummary, ...]:
    return tuple(
        JobSummary(j.jid, j.name, j.state, j.job_type, j.start_time, j.end_time)
        for j in _Overview.model_validate(payload).jobs
    )


def _plan(plan: _Plan) -> tuple[PlanNode, ...]:
    return tuple(PlanNode(n.id, n.description, n.parallelism, tuple(i.id for i in n.inputs)) for n in plan.nodes)


def parse_plan(payload: Any) -> tuple[PlanNode, ...]:
    """``/jobs/{id}/plan``: ``{"plan": {"nodes": [...]}}``."""
    return _plan(_JobPlan.model_validate(payload).plan)


def parse_job(payload: Any) -> JobDetail:
    j = _Job.model_validate(payload)
    return JobDetail(
        jid=j.jid,
        name=j.name,
        state=j.state,
        job_type=j.job_type,
        start_time=j.start_time,
        end_time=j.end_time,
        max_parallelism=j.max_parallelism,
        vertices=tuple(
            Vertex(
                v.id,
                v.name,
                v.parallelism,
                v.status,
                IOMetrics(v.metrics.read_records, v.metrics.write_records, v.metrics.read_bytes, v.metrics.write_bytes),
            )
            for v in j.vertices
        ),
        plan=_plan(j.plan) if j.plan is not None else None,
        timestamps=j.timestamps,
    )


def parse_job_config(payload: Any) -> JobConfig:
    c = _JobConfig.model_validate(payload).execution_config
    return JobConfig(user_config=c.user_config, restart_strategy=c.restart_strategy)


def parse_checkpoints(payload: Any) -> CheckpointStats:
    c = _Checkpoints.model_validate(payload)
    completed = c.latest.completed if c.latest is not None else None
    return CheckpointStats(
        completed=c.counts.completed,
        failed=c.counts.failed,
        restored=c.counts.restored,
        latest_completed_ms=completed.latest_ack_timestamp if completed is not None else None,
    )


def parse_checkpoint_config(payload: Any) -> CheckpointConfig:
    c = _CheckpointConfig.model_validate(payload)
    return CheckpointConfig(
        mode=c.mode,
        interval_ms=None if c.interval is None or c.interval >= 2**63 - 1 else c.interval,
        state_backend=c.state_backend,
        storage=c.checkpoint_storage,
        externalized=c.externalization.enabled,
    )


def parse_exceptions(payload: Any) -> ExceptionHistory:
    history = _Exceptions.model_validate(payload).exception_history
    failures = []
    for e in history.entries:
        lines = e.stacktrace.splitlines()
        first = lines[0] if lines else e.exception_name
        causes = [line[len("Caused by: ") :] for line in lines if line.startswith("Caused by: ")]
        concurrent = [c.stacktrace.splitlines()[0] for c in e.concurrent_exceptions if c.stacktrace.strip()]
        root = causes[-1] if causes else (concurrent[0] if concurrent else first)
        failures.append(Failure(e.timestamp, first.strip()[:500], root.strip()[:500]))
    return ExceptionHistory(failures=tuple(failures), truncated=history.truncated)


def parse_vertex_metrics(payload: Any) -> IOMetrics:
    """Summed subtask metrics; one that is not a finite number (NaN: not measured yet) makes the
    answer unusable: the job details' counters stand instead."""
    values = {}
    for i, m in enumerate(_METRICS.validate_python(payload)):
        if not math.isfinite(m.sum):
            raise ValueError(f"field '{i}.sum' of metric {m.id!r} is {m.sum}, not a count")
        values[m.id] = int(m.sum)
    return IOMetrics(
        values.get("numRecordsIn", 0),
        values.get("numRecordsOut", 0),
        values.get("numBytesIn", 0),
        values.get("numBytesOut", 0),
    )


def _field_error(exc: ValidationError) -> str:
    """The first problem of a payload, naming its field (Flink's name; never its value, which may
    be a secret job parameter)."""
    errors = exc.errors(include_url=False)
    first = errors[0]
    field = ".".join(str(p) for p in first["loc"])
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    where = f"field {field!r}" if field else "the answer"
    if first["type"] == "missing":
        return f"{where} missing{more}"
    return f"{where}: {first['msg']} (got {type(first['input']).__name__}){more}"


# --- the client -----------------------------------------------------------------------------


class FlinkRestClient:
    """Typed reads from one JobManager; safe to share between threads (one connection pool)."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.base = conn.url.rstrip("/")
        self._pool = new_pool(conn)

    def close(self) -> None:
        self._pool.close()

    def get(self, path: str) -> Any:
        """GET ``/v1{path}`` → parsed JSON (retried by the pool on 5xx/429/connection errors)."""
        url = f"{self.base}/v1{path}"
        return call(self._pool, f"GET {url}", "GET", url)

    def _read(self, path: str, parse: Callable[[Any], T]) -> T:
        """GET ``path`` typed by ``parse``: a payload it cannot take is a FlinkRestError too."""
        payload = self.get(path)
        try:
            return parse(payload)
        except ValidationError as exc:
            raise FlinkRestError(f"GET {self.base}/v1{path}: {_field_error(exc)}") from None
        except ValueError as exc:
            raise FlinkRestError(f"GET {self.base}/v1{path}: {exc}") from None

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
            detail = replace(detail, plan=self._read(f"/jobs/{jid}/plan", parse_plan))
        return detail

    def job_config(self, jid: str) -> JobConfig:
        return self._read(f"/jobs/{jid}/config", parse_job_config)

    def checkpoints(self, jid: str) -> CheckpointStats | None:
        """None when checkpointing is not enabled (Flink answers 404, e.g. for batch jobs)."""
        return self._unless_404(f"/jobs/{jid}/checkpoints", parse_checkpoints)

    def checkpoint_config(self, jid: str) -> CheckpointConfig | None:
        """None when checkpointing is not enabled."""
        return self._unless_404(f"/jobs/{jid}/checkpoints/config", parse_checkpoint_config)

    def exceptions(self, jid: str) -> ExceptionHistory:
        return self._read(f"/jobs/{jid}/exceptions", parse_exceptions)

    def vertex_io(self, jid: str, vid: str) -> IOMetrics:
        """Task I/O counters of a live vertex, summed over its subtasks."""
        path = f"/jobs/{jid}/vertices/{vid}/subtasks/metrics?get={','.join(VERTEX_METRICS)}&agg=sum"
        return self._read(path, parse_vertex_metrics)
