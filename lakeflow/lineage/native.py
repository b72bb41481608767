"""Flink's native lineage (FLIP-314), pushed into the lineage store by lakeflow's listener
(``lakeflow.flink.OpenLineageListener``, ``java/``), merged with what the harvest pulls, by job id.

The listener writes a ``START`` event when a job is created (with the datasets of its sources and
sinks) and ``COMPLETE`` / ``FAIL`` / ``ABORT`` when it ends; the job is ``flink`` / the job's name
and the run id is the Flink job id as a UUID. A job the JobManager still lists is one job with the
events' datasets merged in; a job it no longer lists (its job store forgot it) is built from the
events alone, as long as its name and state pass the harvest's filters.

A SQL table comes with its identifier (the ``lakeflow_flink_table`` facet): it stands for the
plan's references to that table, whose resolutions (or unresolved reasons) it replaces — the
listener saw the table the job was planned with, temporary and job-local ones included; the
harvest asks the SQL Gateway nothing about a table the listener settled (:func:`settled`). A table
the listener could not name (namespace ``""``, Flink's own name) is resolved through the SQL
Gateway as a plan table is, unless only the job's own session knew it; what stays unresolved is
reported once, with the reason.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from lakeflow.lineage.config import HarvestConfig
from lakeflow.lineage.datasets import DatasetId
from lakeflow.lineage.flink_rest import ExceptionHistory, Failure, JobDetail
from lakeflow.lineage.graph import FlinkJob, StoredRun
from lakeflow.lineage.plan import SINK, SOURCE, Reference, table_ref
from lakeflow.lineage.resolve import NOT_DATASETS, Resolution, Resolver
from lakeflow.lineage.store import is_flink
from lakeflow.lineage.stored_runs import merge as merge_events

log = logging.getLogger(__name__)

NATIVE = "native"  # evidence of a dataset named by the job's own native lineage
STATES = {"START": "CREATED", "COMPLETE": "FINISHED", "FAIL": "FAILED", "ABORT": "CANCELED"}
FLINK_TABLE = "lakeflow_flink_table"  # the listener's facet on each dataset of a SQL table
TABLE_SYMLINKS = frozenset({"flink-catalog", "flink-job"})  # a table's identifier: not another name of the dataset
SESSION_KINDS = frozenset({"in-memory", "temporary", "anonymous"})  # tables no other session can look up
ROLES = {"inputs": SOURCE, "outputs": SINK}


class _TableFacet(BaseModel):
    """The listener's ``lakeflow_flink_table`` facet (docs/openlineage/LakeflowFlinkTableDatasetFacet.json)."""

    model_config = ConfigDict(extra="ignore", frozen=True)
    identifier: str
    kind: str = ""
    connector: str = ""
    topic_pattern: str | None = Field(None, alias="topicPattern")


@dataclass(frozen=True, order=True)
class PushedTable:
    """A SQL source or sink as the listener saw it; ``datasets`` is empty when it could not name it."""

    role: str
    identifier: str
    kind: str = ""  # catalog / in-memory / temporary / anonymous; "" when the event does not say
    connector: str = ""
    datasets: tuple[DatasetId, ...] = ()
    pattern: str | None = None  # a Kafka table's topic-pattern: named by the pattern, not a topic


@dataclass(frozen=True)
class NativeRun:
    """One Flink job's pushed events, merged (datasets, times, error) like a compaction run's."""

    run: StoredRun
    processing_type: str | None  # STREAMING / BATCH from the START event's jobType facet
    tables: tuple[PushedTable, ...] = ()

    @property
    def job_id(self) -> str:
        """The Flink job id (32 hex digits): the run id without its dashes."""
        return self.run.run_id.replace("-", "").lower()


def runs(events: Iterable[Mapping[str, Any]]) -> list[NativeRun]:
    """The Flink runs among stored events (:func:`lakeflow.lineage.store.is_flink`), each merged
    from its events, its SQL tables read from their ``lakeflow_flink_table`` facets."""
    events = [e for e in events if is_flink(e)]
    processing: dict[str, str] = {}
    tables: dict[str, dict[tuple[str, str], PushedTable]] = {}
    for e in events:
        run_id = str(e["run"]["runId"])
        kind = (((e.get("job") or {}).get("facets") or {}).get("jobType") or {}).get("processingType")
        if kind:
            processing[run_id] = str(kind)
        for key, role in ROLES.items():
            for d in e.get(key) or ():
                _add_table(tables.setdefault(run_id, {}), role, d)
    return [
        NativeRun(r, processing.get(r.run_id), tuple(sorted(tables.get(r.run_id, {}).values())))
        for r in merge_events(events)
    ]


def _add_table(tables: dict[tuple[str, str], PushedTable], role: str, d: Any) -> None:
    raw = ((d.get("facets") or {}).get(FLINK_TABLE)) if isinstance(d, Mapping) else None
    if raw is None:
        return
    try:
        facet = _TableFacet.model_validate(raw)
    except ValidationError as exc:
        log.warning("lineage store: a %s facet left out: %s", FLINK_TABLE, exc.errors()[0]["msg"])
        return
    t = tables.get((role, facet.identifier)) or PushedTable(role, facet.identifier, facet.kind, facet.connector)
    if d.get("namespace"):
        dataset = DatasetId(str(d["namespace"]), str(d["name"]))
        t = replace(t, datasets=tuple(sorted({*t.datasets, dataset})), pattern=facet.topic_pattern or t.pattern)
    tables[(role, facet.identifier)] = t


def merge(
    jobs: Iterable[FlinkJob],
    pushed: Iterable[NativeRun],
    config: HarvestConfig,
    resolver: Resolver,
    listed: Iterable[str] = (),
) -> tuple[list[FlinkJob], int]:
    """The ``jobs`` pulled from the JobManager with the ``pushed`` runs merged in by job id, plus
    the pushed runs of jobs the cluster no longer ``listed`` that pass the config's name and state
    filters; and how many pushed runs were used. ``resolver`` resolves the tables the listener
    named by their identifier only."""
    by_id = {n.job_id: n for n in pushed}
    listed = set(listed)
    out, used = [], 0
    for job in jobs:
        native = by_id.pop(job.detail.jid, None)
        if native is not None:
            used += 1
            job = replace(job, resolutions=combine(job.resolutions, native, resolver))
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
            FlinkJob(detail, None, None, None, ExceptionHistory(failures, False), None, combine((), native, resolver))
        )
    return out, used


def settled(native: NativeRun, config: HarvestConfig) -> Callable[[Reference], bool]:
    """Whether a plan reference is to a table the listener settled (it named its datasets or a
    connector that is not a dataset, or only the job's own session knew the table) and
    ``catalog_platform_map`` does not map: the harvest asks the SQL Gateway nothing about it,
    :func:`combine` gives it the listener's resolution."""
    tables = [
        t
        for t in native.tables
        if (t.datasets or t.connector in NOT_DATASETS or t.kind in SESSION_KINDS) and not _mapped(config, t)
    ]
    return lambda ref: any(_same_table(ref, t) for t in tables)


def combine(pulled: Iterable[Resolution], native: NativeRun, resolver: Resolver) -> tuple[Resolution, ...]:
    """A job's resolutions: the ``pulled`` ones (from its plan), each table the listener pushed in
    place of the plan's references to it, and the other pushed datasets (a DataStream job's)."""
    out = list(pulled)
    tables = list(native.tables)
    claimed = {(t.role, d) for t in tables for d in (*t.datasets, DatasetId("", t.identifier))}
    for role, d in _datasets(native.run):
        identifier_only = not d.namespace or _names_a_plan_table(d, out)  # Flink's own name of a table
        if identifier_only and (role, d) not in claimed:
            tables.append(PushedTable(role, d.name))
            claimed.add((role, d))
    for table in tables:
        t = table_ref(table.identifier)
        if not table.connector and table.kind not in SESSION_KINDS and t is not None:
            table = replace(table, connector=resolver.connector(t))  # an event without the listener's facet
        matched = [r for r in out if _same_table(r.reference, table)]
        out = [r for r in out if r not in matched] + _table(table, matched, resolver)
    others = [(role, d) for role, d in _datasets(native.run) if (role, d) not in claimed]
    known = {(r.reference.role, r.dataset) for r in out if r.dataset is not None}
    for role, d in others:
        if (role, d) not in known:
            ref = Reference(role, NATIVE, "", "native lineage", value=str(d))
            aliases = tuple(a for a in native.run.aliases.get(d, ()) if a.namespace not in TABLE_SYMLINKS)
            out.append(resolver.with_instance(Resolution(ref, d, aliases, evidence=NATIVE)))
    for role in (SOURCE, SINK):  # operators Flink's lineage names the datasets of, but not the operator
        guesses = [r for r in out if r.unresolved and r.reference.name_only and r.reference.role == role]
        if guesses and len(guesses) <= len({d for r, d in others if r == role}):
            out = [r for r in out if r not in guesses]
    return tuple(sorted(set(out)))


def _datasets(run: StoredRun) -> list[tuple[str, DatasetId]]:
    return [(SOURCE, d) for d in run.inputs] + [(SINK, d) for d in run.outputs]


def _names_a_plan_table(d: DatasetId, pulled: list[Resolution]) -> bool:
    """Whether a dataset without the listener's table facet names a table of the plan instead of a
    dataset: the Kafka SQL sink (flink-sql-connector-kafka 5.0.0-2.2) puts the table's identifier
    where its topic belongs (``kafka://host:port`` / ``catalog.db.table``)."""
    named = None if "/" in d.name else table_ref(d.name)
    return named is not None and any(
        r.reference.table is not None
        and (
            r.reference.table == named or r.reference.kind == "table-writer" and r.reference.table.table == named.table
        )
        for r in pulled
    )


def _same_table(ref: Reference, table: PushedTable) -> bool:
    """Whether a plan reference is the pushed table: same role, and its identifier (the bare name
    of a Sink V2 writer), or a filesystem sink the plan does not name."""
    if ref.role != table.role:
        return False
    if ref.kind == "filesystem":
        return table.connector == "filesystem"
    t = table_ref(table.identifier)
    if ref.table is None or t is None:
        return False
    return ref.table == t if ref.table.catalog else ref.kind == "table-writer" and ref.table.table == t.table


def _table(table: PushedTable, matched: list[Resolution], resolver: Resolver) -> list[Resolution]:
    """What a pushed table resolves to: the datasets the listener named, else what the plan or the
    SQL Gateway could tell, else why not; ``catalog_platform_map``'s word first."""
    t = table_ref(table.identifier)
    ref = (
        matched[0].reference
        if matched
        else Reference(table.role, NATIVE, "", f"native lineage: table {table.identifier}", table=t)
    )
    what = f"{table.kind} table {table.identifier}" if table.kind else f"table {table.identifier}"
    if table.connector in NOT_DATASETS:
        return [Resolution(ref, skipped=f"{table.identifier}: connector '{table.connector}' is not a dataset")]
    if table.pattern is not None:
        return [Resolution(ref, unresolved=f"{what}: Kafka topic-pattern '{table.pattern}' names no topic")]
    if t is not None and _mapped(resolver.config, table):
        return matched or resolver.table(ref, t)  # the user's word wins
    if table.datasets:
        return [resolver.with_instance(Resolution(ref, d, evidence=NATIVE)) for d in table.datasets]
    if any(r.dataset or r.skipped for r in matched):
        return matched
    if table.kind in SESSION_KINDS:
        return [
            Resolution(
                ref,
                unresolved=f"{what}: lakeflow's listener names no dataset of connector '{table.connector}', and "
                "no other session can look the table up",
            )
        ]
    if t is None:
        return [Resolution(ref, unresolved=f"{what}: not a catalog.database.table identifier")]
    return resolver.table(ref, t)


def _mapped(config: HarvestConfig, table: PushedTable) -> bool:
    """Whether ``catalog_platform_map`` names the platform of ``table``'s catalog."""
    t = table_ref(table.identifier)
    mapped = config.catalog_platform_map.get(t.catalog or "") if t is not None else None
    return bool(mapped and mapped.platform)


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
