"""Flink's native lineage (FLIP-314), pushed into the lineage store by lakeflow's listener
(``lakeflow.flink.OpenLineageListener``, ``java/``), merged with what the harvest pulls, by job id.

The listener writes a ``START`` event when a job is created (with the datasets of its sources and
sinks) and ``COMPLETE`` / ``FAIL`` / ``ABORT`` when it ends; the job is ``flink`` / the job's name
and the run id is the Flink job id as a UUID. A job the JobManager still lists is one job with the
events' datasets added (evidence ``native``); a job it no longer lists (its job store forgot it)
is built from the events alone, as long as its name and state pass the harvest's filters.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from lakeflow.lineage.config import HarvestConfig
from lakeflow.lineage.flink_rest import ExceptionHistory, Failure, JobDetail
from lakeflow.lineage.graph import FlinkJob, StoredRun
from lakeflow.lineage.plan import SINK, SOURCE, Reference, table_ref
from lakeflow.lineage.resolve import Resolution
from lakeflow.lineage.store import is_flink
from lakeflow.lineage.stored_runs import merge as merge_events

NATIVE = "native"  # evidence of a dataset named by the job's own native lineage
STATES = {"START": "CREATED", "COMPLETE": "FINISHED", "FAIL": "FAILED", "ABORT": "CANCELED"}


@dataclass(frozen=True)
class NativeRun:
    """One Flink job's pushed events, merged (datasets, times, error) like a compaction run's."""

    run: StoredRun
    processing_type: str | None  # STREAMING / BATCH from the START event's jobType facet

    @property
    def job_id(self) -> str:
        """The Flink job id (32 hex digits): the run id without its dashes."""
        return self.run.run_id.replace("-", "").lower()


def runs(events: Iterable[Mapping[str, Any]]) -> list[NativeRun]:
    """The Flink runs among stored events (:func:`lakeflow.lineage.store.is_flink`), each merged
    from its events."""
    events = [e for e in events if is_flink(e)]
    processing: dict[str, str] = {}
    for e in events:
        kind = (((e.get("job") or {}).get("facets") or {}).get("jobType") or {}).get("processingType")
        if kind:
            processing[str(e["run"]["runId"])] = str(kind)
    return [NativeRun(r, processing.get(r.run_id)) for r in merge_events(events)]


def merge(
    jobs: Iterable[FlinkJob], pushed: Iterable[NativeRun], config: HarvestConfig, listed: Iterable[str] = ()
) -> tuple[list[FlinkJob], int]:
    """The ``jobs`` pulled from the JobManager with the ``pushed`` runs merged in by job id, plus
    the pushed runs of jobs the cluster no longer ``listed`` that pass the config's name and state
    filters; and how many pushed runs were used."""
    by_id = {n.job_id: n for n in pushed}
    listed = set(listed)
    out, used = [], 0
    for job in jobs:
        native = by_id.pop(job.detail.jid, None)
        if native is not None:
            used += 1
            added = _resolutions(native.run, job.resolutions)
            job = replace(job, resolutions=tuple(sorted({*job.resolutions, *added})))
        out.append(job)
    for jid, native in sorted(by_id.items()):
        run = native.run
        state = STATES.get(run.event_type, run.event_type)
        if jid in listed or not config.job_name_pattern.allowed(run.name) or state not in config.include_job_states:
            continue
        used += 1
        detail = JobDetail(
            jid=jid,
            name=run.name,
            state=state,
            job_type=native.processing_type,
            start_time=run.start_ms or -1,
            end_time=run.end_ms or -1,
            max_parallelism=-1,
            vertices=(),
            plan=None,
            timestamps={},
        )
        error = run.properties.get("error")
        failures = (Failure(run.end_ms or 0, error, error),) if error else ()
        out.append(
            FlinkJob(
                detail, None, None, None, ExceptionHistory(failures, False), None, tuple(sorted(_resolutions(run, ())))
            )
        )
    return out, used


def _resolutions(run: StoredRun, pulled: Iterable[Resolution]) -> list[Resolution]:
    """The run's datasets as resolutions, but those the pulled ones already name (same role) and
    those that name a SQL table instead of a dataset: Flink names a table whose connector declares
    no lineage by its catalog identifier alone (``""`` / ``catalog.db.table``), and the Kafka SQL
    sink (flink-sql-connector-kafka 5.0.0-2.2) puts that identifier where its topic belongs
    (``kafka://host:port`` / ``catalog.db.table``); the plan resolves those tables instead."""
    pulled = list(pulled)
    known = {(r.reference.role, r.dataset) for r in pulled if r.dataset is not None}
    tables = {str(r.reference.table) for r in pulled if r.reference.table and r.reference.table.catalog}
    writers = {r.reference.table.table for r in pulled if r.reference.kind == "table-writer" and r.reference.table}
    out = []
    for role, items in ((SOURCE, run.inputs), (SINK, run.outputs)):
        for d in items:
            named = None if "/" in d.name else table_ref(d.name)
            if named is not None and (str(named) in tables or named.table in writers):
                continue
            if d.namespace and (role, d) not in known:
                ref = Reference(role, NATIVE, "", "native lineage", value=str(d))
                out.append(Resolution(ref, d, run.aliases.get(d, ()), evidence=NATIVE))
    return out


LISTENER_FACTORY = "lakeflow.flink.OpenLineageListener$Factory"


def listener_conf(directory: Path | None = None, url: str | None = None) -> dict[str, str]:
    """Flink configuration enabling lakeflow's listener (cluster-wide: the JobManager and the
    ``flink`` client read it), writing into the lineage store ``directory`` and/or POSTing to the
    OpenLineage endpoint ``url``. Its jar must be on the cluster's classpath (``lib/``)."""
    if directory is None and url is None:
        raise ValueError("native lineage needs a lineage store directory or an OpenLineage URL")
    conf = {"execution.job-status-changed-listeners": LISTENER_FACTORY}
    if directory is not None:
        conf["lakeflow.lineage.dir"] = str(Path(directory).resolve())
    if url is not None:
        conf["lakeflow.lineage.url"] = url
    return conf
