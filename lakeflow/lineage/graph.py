"""The lineage graph: flows, tasks, runs and datasets of Flink jobs and compaction runs.

* **Flow** (DataHub DataFlow) per job *name*: a Flink job keeps its identity across
  resubmissions; a compaction job per OpenLineage (namespace, name), named by the engine that ran
  it (arrow or spark; the orchestrator key ``compaction`` stands for compaction runs of either engine).
* **Task** (DataJob) per flow (``operator_granularity: job``) or per plan vertex (``vertex``;
  vertex ids are Flink's, stable while the topology is; vertex tasks link to their upstream
  vertices). A flow's tasks describe its newest run (a live one if there is one).
* **Run** (DataProcessInstance) per Flink job id and per compaction run id — every run the job
  store still holds, never one per name.
* Datasets are canonical (:mod:`lakeflow.lineage.datasets`); a dataset named by an alias of
  another (e.g. a catalog identity) is folded into the one with the location. A dataset's columns
  are the newest a compaction run's events give it, else the newest lakeflow's listener pushed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from lakeflow.lineage.columns import Column
from lakeflow.lineage.datasets import DatasetId
from lakeflow.lineage.flink_rest import (
    CheckpointConfig,
    CheckpointStats,
    ExceptionHistory,
    IOMetrics,
    JobConfig,
    JobDetail,
)
from lakeflow.lineage.resolve import Resolution
from lakeflow.secret import redact, strip_credentials

FLINK, COMPACTION = "flink", "compaction"
RESULTS = {
    "FINISHED": "SUCCESS",
    "FAILED": "FAILURE",
    "CANCELED": "SKIPPED",
    "COMPLETE": "SUCCESS",
    "FAIL": "FAILURE",
    "ABORT": "SKIPPED",
}


@dataclass(frozen=True)
class FlinkJob:
    """Everything read about one Flink job id, typed, plus the resolved references."""

    detail: JobDetail
    config: JobConfig | None
    checkpoints: CheckpointStats | None
    checkpoint_config: CheckpointConfig | None
    exceptions: ExceptionHistory | None
    live_io: IOMetrics | None
    resolutions: tuple[Resolution, ...]


def compaction_label(engine: str | None) -> str:
    """What a compaction job is called: by the engine that ran it (``arrow``, ``spark``) when known."""
    return f"compaction job ({engine} engine)" if engine else "compaction job"


@dataclass(frozen=True)
class StoredRun:
    """One run read from the lineage store (a compaction run, or a Flink run lakeflow's listener pushed),
    merged from its OpenLineage START / COMPLETE / FAIL events."""

    run_id: str
    namespace: str
    name: str
    event_type: str  # the last event's type
    start_ms: int | None
    end_ms: int | None
    inputs: tuple[DatasetId, ...]
    outputs: tuple[DatasetId, ...]
    aliases: Mapping[DatasetId, tuple[DatasetId, ...]]
    properties: Mapping[str, str]
    io: IOMetrics = IOMetrics()  # rows/bytes from the final event's input/output statistics facets
    schemas: Mapping[DatasetId, tuple[Column, ...]] = field(default_factory=dict)  # the datasets' schema facets


@dataclass(frozen=True, order=True)
class Dataset:
    id: DatasetId
    aliases: tuple[DatasetId, ...] = ()
    platform_instance: str | None = None
    schema: tuple[Column, ...] = ()  # its columns (empty: unknown)


@dataclass(frozen=True, order=True)
class Flow:
    orchestrator: str
    name: str
    description: str
    url: str
    properties: tuple[tuple[str, str], ...]


@dataclass(frozen=True, order=True)
class Task:
    orchestrator: str
    flow: str
    id: str
    name: str
    process_type: str
    inputs: tuple[DatasetId, ...]
    outputs: tuple[DatasetId, ...]
    upstream: tuple[str, ...]  # task ids in the same flow
    properties: tuple[tuple[str, str], ...]


@dataclass(frozen=True, order=True)
class Run:
    orchestrator: str
    flow: str
    run_id: str
    task: str
    state: str
    result: str | None  # SUCCESS / FAILURE / SKIPPED; None while live
    process_type: str  # STREAMING / BATCH
    start_ms: int | None
    end_ms: int | None
    restarts: int
    failure: str | None
    io: IOMetrics
    inputs: tuple[DatasetId, ...]
    outputs: tuple[DatasetId, ...]
    url: str
    properties: tuple[tuple[str, str], ...]


@dataclass(frozen=True, order=True)
class JobLineage:
    """One job id's lineage as the neutral JSON shows it."""

    engine: str
    name: str
    job_id: str
    state: str
    inputs: tuple[DatasetId, ...]
    outputs: tuple[DatasetId, ...]
    unresolved: tuple[str, ...]
    skipped: tuple[str, ...]
    evidence: tuple[tuple[str, str], ...]  # (dataset, declared / plan / name-only)


@dataclass(frozen=True)
class Graph:
    flows: tuple[Flow, ...]
    tasks: tuple[Task, ...]
    runs: tuple[Run, ...]
    jobs: tuple[JobLineage, ...]
    datasets: tuple[Dataset, ...]
    failed_jobs: tuple[tuple[str, str], ...] = ()  # (job id, error) for jobs that could not be read

    def edges(self) -> list[tuple[str, str]]:
        """Lineage edges between datasets and flows (``dataset:<id>`` / ``<engine>:<flow>``)."""
        out = set()
        for t in self.tasks:
            for d in t.inputs:
                out.add((f"dataset:{d}", f"{t.orchestrator}:{t.flow}"))
            for d in t.outputs:
                out.add((f"{t.orchestrator}:{t.flow}", f"dataset:{d}"))
        return sorted(out)


@dataclass
class _Canon:
    """Folds aliases onto canonical datasets (union by shared identities). The canonical one of a
    group is a dataset a job named (not only an alias), a location before anything else."""

    primary: set[DatasetId] = field(default_factory=set)
    parent: dict[DatasetId, DatasetId] = field(default_factory=dict)

    def find(self, d: DatasetId) -> DatasetId:
        while self.parent.get(d, d) != d:
            d = self.parent[d]
        return d

    def union(self, a: DatasetId, b: DatasetId) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            keep, drop = sorted((ra, rb), key=self._preference)
            self.parent[drop] = keep

    def _preference(self, d: DatasetId) -> tuple:
        location = d.namespace in ("file",) or (d.platform in ("s3", "gs", "hdfs") or d.platform.startswith("abfs"))
        return (d not in self.primary, not location, d)


def build(
    flink_jobs: Iterable[FlinkJob],
    compaction_runs: Iterable[StoredRun],
    *,
    vertex_granularity: bool,
    rest_url: str,
    flink_version: str = "",
    failed_jobs: Iterable[tuple[str, str]] = (),
    include_runs: bool = True,
    pushed: Iterable[StoredRun] = (),
) -> Graph:
    """The graph of every harvested job; sorted, so equal inputs give equal graphs. Without
    ``include_runs`` there are no runs (DataProcessInstances). ``rest_url`` is published without
    credentials. ``pushed`` (the Flink runs lakeflow's listener pushed) give the schemas of the
    datasets no compaction run describes."""
    flink_jobs, compaction_runs = list(flink_jobs), list(compaction_runs)
    rest_url = strip_credentials(rest_url)
    canon, instances = _Canon(), {}
    links = [(r.dataset, a) for job in flink_jobs for r in job.resolutions if r.dataset for a in r.aliases]
    links += [(d, a) for run in compaction_runs for d in run.inputs + run.outputs for a in run.aliases.get(d, ())]
    canon.primary = {r.dataset for job in flink_jobs for r in job.resolutions if r.dataset}
    canon.primary |= {d for run in compaction_runs for d in run.inputs + run.outputs}
    for d, alias in sorted(links):
        canon.union(d, alias)
    for job in flink_jobs:
        for r in job.resolutions:
            if r.dataset is not None and r.platform_instance:
                instances[canon.find(r.dataset)] = r.platform_instance
    known = canon.primary

    def c(items: Iterable[DatasetId]) -> tuple[DatasetId, ...]:
        return tuple(sorted({canon.find(d) for d in items}))

    flows, tasks, runs, jobs = [], [], [], []
    by_name: dict[str, list[FlinkJob]] = {}
    for job in flink_jobs:
        by_name.setdefault(job.detail.name, []).append(job)
    for name, group in sorted(by_name.items()):
        current = max(group, key=lambda j: (j.detail.live, j.detail.start_time, j.detail.jid))
        flows.append(_flink_flow(current, rest_url, flink_version, len(group)))
        tasks.extend(_flink_tasks(current, c, vertex_granularity))
        task_id = (
            name if not vertex_granularity else (current.detail.vertices[0].id if current.detail.vertices else name)
        )
        for job in group:
            inputs = c(r.dataset for r in job.resolutions if r.dataset and r.reference.role == "source")
            outputs = c(r.dataset for r in job.resolutions if r.dataset and r.reference.role == "sink")
            runs.append(_flink_run(job, task_id, inputs, outputs, rest_url))
            jobs.append(
                JobLineage(
                    engine=FLINK,
                    name=name,
                    job_id=job.detail.jid,
                    state=job.detail.state,
                    inputs=inputs,
                    outputs=outputs,
                    unresolved=tuple(sorted({r.unresolved for r in job.resolutions if r.unresolved})),
                    skipped=tuple(sorted({r.skipped for r in job.resolutions if r.skipped})),
                    evidence=tuple(
                        sorted({(str(canon.find(r.dataset)), r.evidence) for r in job.resolutions if r.dataset})
                    ),
                )
            )
    compaction_flows: dict[tuple[str, str], StoredRun] = {}
    for run in compaction_runs:
        key = (run.namespace, run.name)
        if key not in compaction_flows or (run.start_ms or 0, run.run_id) > (
            compaction_flows[key].start_ms or 0,
            compaction_flows[key].run_id,
        ):
            compaction_flows[key] = run
        inputs, outputs = c(run.inputs), c(run.outputs)
        flow = f"{run.namespace}.{run.name}"
        state = run.event_type
        props = {**run.properties, "openlineage_namespace": run.namespace, "openlineage_name": run.name}
        runs.append(
            Run(
                COMPACTION,
                flow,
                run.run_id,
                run.name,
                state,
                RESULTS.get(state),
                "BATCH",
                run.start_ms,
                run.end_ms,
                0,
                run.properties.get("error"),
                run.io,
                inputs,
                outputs,
                "",
                tuple(sorted(props.items())),
            )
        )
        jobs.append(
            JobLineage(
                COMPACTION,
                flow,
                run.run_id,
                state,
                inputs,
                outputs,
                (),
                (),
                tuple(sorted((str(d), "declared") for d in inputs + outputs)),
            )
        )
    for (namespace, name), run in sorted(compaction_flows.items()):
        flow = f"{namespace}.{name}"
        engine = run.properties.get("engine")  # of the newest run: arrow or spark (older events: unknown)
        flows.append(
            Flow(
                COMPACTION,
                flow,
                compaction_label(engine) + " (from its OpenLineage run events)",
                "",
                (("openlineage_namespace", namespace), *((("engine", engine),) if engine else ())),
            )
        )
        tasks.append(Task(COMPACTION, flow, name, name, "BATCH", c(run.inputs), c(run.outputs), (), ()))

    schemas: dict[DatasetId, tuple[Column, ...]] = {}
    for source in (pushed, compaction_runs):  # a compaction's schema over the listener's, the newest run's last
        for run in sorted(source, key=lambda r: (r.end_ms or r.start_ms or 0, r.run_id)):
            schemas.update({canon.find(d): s for d, s in run.schemas.items()})
    aliases: dict[DatasetId, list[DatasetId]] = {}  # canonical dataset → the others folded onto it
    for a in canon.parent:
        root = canon.find(a)
        if root != a:
            aliases.setdefault(root, []).append(a)
    datasets = [
        Dataset(d, tuple(sorted(aliases.get(d, ()))), instances.get(d), schemas.get(d, ()))
        for d in sorted(known)
        if canon.find(d) == d
    ]
    return Graph(
        tuple(sorted(flows)),
        tuple(sorted(tasks)),
        tuple(sorted(runs)) if include_runs else (),
        tuple(sorted(jobs)),
        tuple(datasets),
        tuple(sorted(failed_jobs)),
    )


def _props(items: Mapping[str, object]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, str(v)) for k, v in items.items() if v is not None and v != ""))


def _flink_flow(job: FlinkJob, rest_url: str, flink_version: str, runs: int) -> Flow:
    d, cc = job.detail, job.checkpoint_config
    props: dict[str, object] = {
        "flink_job_id": d.jid,
        "job_state": d.state,
        "job_type": d.job_type,
        "flink_version": flink_version,
        "runs_in_job_store": runs,
    }
    if d.max_parallelism > 0:
        props["max_parallelism"] = d.max_parallelism
    if cc is not None:
        props.update(
            checkpoint_mode=cc.mode,
            checkpoint_interval_ms=cc.interval_ms,
            state_backend=cc.state_backend,
            checkpoint_storage=cc.storage,
            externalized_checkpoints=str(cc.externalized).lower(),
        )
    if job.config is not None:
        props.update({f"param.{k}": v for k, v in redact(job.config.user_config).items()})  # no credentials out
    kind = (d.job_type or "").title()
    return Flow(
        FLINK, d.name, f"Flink {kind} job".replace("  ", " "), f"{rest_url}/#/job/{d.jid}/overview", _props(props)
    )


def _flink_tasks(job: FlinkJob, c, vertex_granularity: bool) -> list[Task]:
    d = job.detail
    kind = d.job_type or "STREAMING"
    if not vertex_granularity:
        ins = c(r.dataset for r in job.resolutions if r.dataset and r.reference.role == "source")
        outs = c(r.dataset for r in job.resolutions if r.dataset and r.reference.role == "sink")
        return [
            Task(
                FLINK,
                d.name,
                d.name,
                d.name,
                kind,
                ins,
                outs,
                (),
                _props({"flink_job_id": d.jid, "operators": len(d.plan or ())}),
            )
        ]
    upstream = {n.id: tuple(sorted(n.inputs)) for n in d.plan or ()}
    tasks = []
    for v in d.vertices:
        mine = [r for r in job.resolutions if r.dataset and r.reference.vertex_id == v.id]
        ins = c(r.dataset for r in mine if r.reference.role == "source")
        outs = c(r.dataset for r in mine if r.reference.role == "sink")
        if not any(v.id in ups for ups in upstream.values()):  # a terminal vertex: declared-only outputs
            outs = c(list(outs) + [r.dataset for r in job.resolutions if r.dataset and not r.reference.vertex_id])
        tasks.append(
            Task(
                FLINK,
                d.name,
                v.id,
                v.name,
                kind,
                ins,
                outs,
                upstream.get(v.id, ()),
                _props({"flink_job_id": d.jid, "vertex_id": v.id, "parallelism": v.parallelism}),
            )
        )
    return tasks


def _flink_run(job: FlinkJob, task_id: str, inputs, outputs, rest_url: str) -> Run:
    d = job.detail
    failures = job.exceptions.failures if job.exceptions else ()
    restarts = max(0, len(failures) - (1 if d.state == "FAILED" else 0))
    io = job.live_io if job.live_io is not None else sum((v.io for v in d.vertices), IOMetrics())
    props: dict[str, object] = {"flink_job_id": d.jid, "job_state": d.state}
    if job.checkpoints is not None:
        props.update(
            checkpoints_completed=job.checkpoints.completed,
            checkpoints_failed=job.checkpoints.failed,
            checkpoints_restored=job.checkpoints.restored,
        )
    if job.exceptions is not None and job.exceptions.truncated:
        props["exception_history_truncated"] = "true"
    return Run(
        FLINK,
        d.name,
        d.jid,
        task_id,
        d.state,
        None if d.live else RESULTS.get(d.state),
        d.job_type or "STREAMING",
        d.start_time if d.start_time > 0 else None,
        d.end_time if d.end_time > 0 and not d.live else None,
        restarts,
        failures[0].root_cause if failures else None,
        io,
        inputs,
        outputs,
        f"{rest_url}/#/job/{d.jid}/overview",
        _props(props),
    )
