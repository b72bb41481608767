"""One harvest: read the JobManager (and the SQL Gateway, and the lineage store), build the graph.

The lineage store holds the compaction's run events and the Flink runs pushed by lakeflow's
native-lineage listener; those are merged with the jobs pulled, by job id (:mod:`native`). The store
is read first: the SQL Gateway is not asked about the tables the listener named.

Job details are fetched with bounded parallelism (``max_workers``). A job that cannot be read, or
whose answers cannot be used (a bad payload), is reported and left out; the harvest goes on. Jobs
filtered out by name or state are still *seen*: stale-entity removal never removes a job the
cluster still has (e.g. one that is RESTARTING).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lakeflow.lineage.config import HarvestConfig
from lakeflow.lineage.flink_rest import (
    ExceptionHistory,
    FlinkRestClient,
    FlinkRestError,
    IOMetrics,
    JobDetail,
    JobSummary,
)
from lakeflow.lineage.graph import FlinkJob, Graph, StoredRun, build
from lakeflow.lineage.plan import Reference, job_references
from lakeflow.lineage.report import HarvestReport
from lakeflow.lineage.resolve import Resolution, Resolver
from lakeflow.lineage.sql_gateway import SqlGatewayClient

if TYPE_CHECKING:
    from lakeflow.lineage.native import NativeRun

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Harvest:
    graph: Graph
    protected_names: frozenset[str]  # jobs the cluster still has but left out for their state or unreadable
    report: HarvestReport


def harvest(config: HarvestConfig, report: HarvestReport | None = None) -> Harvest:
    """Read everything the config points at and build the lineage graph."""
    report = report or HarvestReport()
    client = FlinkRestClient(config.connection)
    gateway = (
        SqlGatewayClient(config.sql_gateway, config.sql_gateway_operation_timeout_s, config.sql_gateway_max_rows)
        if config.sql_gateway and config.include_lineage
        else None
    )
    try:
        with report.timed("cluster"):
            cluster = client.cluster_config()
            summaries = client.jobs()
        report.jobs_seen = len(summaries)
        selected = _select(config, summaries, report)
        resolver = Resolver(config, gateway)
        events: list[dict] = []
        native_runs: list[NativeRun] = []  # the Flink runs lakeflow's listener pushed
        settled: dict[str, Callable[[Reference], bool]] = {}  # by job id: the tables it named
        if config.lineage_dir is not None:
            from lakeflow.lineage import native
            from lakeflow.lineage.store import read_events

            with report.timed("lineage store"):
                events = list(read_events(config.lineage_dir))
                native_runs = native.runs(events)
            settled = {n.job_id: native.settled(n, config) for n in native_runs}
        log.info(
            "harvesting %d of %d jobs from %s (%d workers)",
            len(selected),
            len(summaries),
            config.connection.url,
            config.max_workers,
        )
        with (
            report.timed("jobs"),
            ThreadPoolExecutor(max_workers=config.max_workers, thread_name_prefix="harvest") as pool,
        ):
            outcomes = list(pool.map(lambda s: _job(client, resolver, config, s, settled.get(s.jid)), selected))
        jobs = [o for o in outcomes if isinstance(o, FlinkJob)]
        failed = [(s.jid, o) for s, o in zip(selected, outcomes, strict=True) if isinstance(o, str)]
        for jid, error in failed:
            report.jobs_failed[jid] = error
            log.warning("job %s: %s", jid, error)
        report.jobs_processed = len(jobs)
        compaction_runs: list[StoredRun] = []
        if config.lineage_dir is not None:
            from lakeflow.lineage.store import is_flink
            from lakeflow.lineage.stored_runs import merge

            with report.timed("lineage store"):
                compaction_runs = merge(e for e in events if not is_flink(e))
                jobs, report.native_runs = native.merge(
                    jobs, native_runs, config, resolver, listed={s.jid for s in summaries}
                )
            report.compaction_runs = len(compaction_runs)
        graph = build(
            jobs,
            compaction_runs,
            vertex_granularity=config.operator_granularity == "vertex",
            rest_url=config.connection.url.rstrip("/"),
            flink_version=cluster.flink_version,
            failed_jobs=failed,
            include_runs=config.include_run_history,
            pushed=[n.run for n in native_runs],
        )
    finally:
        client.close()
        if gateway is not None:
            gateway.close()
    report.edges = len(graph.edges())
    for j in graph.jobs:
        if j.unresolved:
            report.unresolved[f"{j.name} ({j.job_id})"] = list(j.unresolved)
    failed_ids = {jid for jid, _ in failed}
    protected = {
        s.name
        for s in summaries
        if config.job_name_pattern.allowed(s.name)
        and (s.state.upper() not in config.include_job_states or s.jid in failed_ids)
    }
    return Harvest(graph, frozenset(protected), report)


def _select(config: HarvestConfig, summaries: tuple[JobSummary, ...], report: HarvestReport) -> list[JobSummary]:
    selected = []
    for s in sorted(summaries, key=lambda s: (s.name, s.start_time, s.jid)):
        if not config.job_name_pattern.allowed(s.name):
            report.filtered_by_name += 1
        elif s.state.upper() not in config.include_job_states:
            report.filtered_by_state += 1
        else:
            selected.append(s)
    return selected


def _job(
    client: FlinkRestClient,
    resolver: Resolver,
    config: HarvestConfig,
    s: JobSummary,
    settled: Callable[[Reference], bool] | None,
) -> FlinkJob | str:
    """One job, fully read and resolved (but the references lakeflow's listener ``settled``); or
    the error text when it cannot be read or used."""
    try:
        detail = client.job(s.jid)
        job_config = client.job_config(s.jid)
        run_history = config.include_run_history
        streaming = detail.job_type != "BATCH"  # batch jobs have no checkpoints (Flink answers 404)
        checkpoint_config = client.checkpoint_config(s.jid) if streaming else None
        checkpoints = exceptions = None
        if run_history:  # a job that never failed nor restarted has an empty history: not asked
            exceptions = client.exceptions(s.jid) if detail.ever_failed else ExceptionHistory((), False)
            if streaming and (detail.live or detail.ever_failed):  # progress and restores matter here
                checkpoints = client.checkpoints(s.jid)
        live_io = _live_io(client, detail) if run_history and detail.live else None
        resolutions: tuple[Resolution, ...] = ()
        if config.include_lineage:
            resolutions = tuple(resolver.resolve(job_references(detail.plan or ()), job_config.user_config, settled))
        return FlinkJob(detail, job_config, checkpoints, checkpoint_config, exceptions, live_io, resolutions)
    except FlinkRestError as exc:
        return str(exc)
    except (ValueError, TypeError, AttributeError, LookupError, OverflowError, RecursionError) as exc:
        return f"unusable answer ({type(exc).__name__}: {str(exc)[:200]})"  # e.g. a location in its plan


def _live_io(client: FlinkRestClient, detail: JobDetail) -> IOMetrics | None:
    """A live job's task I/O counters; None when the metrics are not (yet) available."""
    try:
        return sum((client.vertex_io(detail.jid, v.id) for v in detail.vertices), IOMetrics())
    except FlinkRestError as exc:
        log.info("job %s: vertex metrics unavailable (%s)", detail.jid, exc)
        return None
