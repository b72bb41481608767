"""The compactor's Prometheus metrics (prometheus-client), fed from each run's JSON report.

``lakeflow compact --every … --metrics-port PORT`` serves them over HTTP for a scrape;
a single ``lakeflow compact`` pushes them to a Pushgateway or writes them as a node_exporter
textfile (:func:`export_once`). Names and labels: docs/operations.md. Every metric but the process's
``lakeflow_compaction_running`` has a ``table`` label: the Iceberg table's ``namespace.table``, an
identity (as a job's name is), so one service or pass over a pipeline's streams exports each table's
figures apart. No label ever holds a location, a URL or a credential: besides the table, only results,
states and kinds from fixed sets.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from lakeflow.errors import ConfigurationError

RESULTS = {0: "ok", 3: "busy"}  # any other exit code: "error"
MAINTENANCE_KINDS = ("snapshots_expired", "orphans_removed", "uploads_aborted", "in_progress_removed")
DURATION_BUCKETS = (1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)
PUSH_JOB = "lakeflow_compact"  # the Pushgateway's job label of a single run
TABLE = ["table"]


class MetricsPortUnavailable(ConfigurationError, RuntimeError):
    """The metrics port cannot be listened on (in use, or not allowed)."""


@dataclass
class TableTimes:
    """What one table's computed gauges read at a scrape (Unix times; None until known)."""

    oldest_pending: float | None = None  # the oldest raw part file found and not compacted yet
    newest_event: float | None = None  # the newest event time visible in the table

    def freshness_lag(self) -> float:
        return 0.0 if self.oldest_pending is None else max(0.0, time.time() - self.oldest_pending)

    def newest_event_time(self) -> float:
        return math.nan if self.newest_event is None else self.newest_event

    def end_to_end_lag(self) -> float:
        return math.nan if self.newest_event is None else max(0.0, time.time() - self.newest_event)


class CompactorMetrics:
    """The compactor's metrics in their own registry (nothing of the process's default one), per table."""

    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        self.runs = Counter(
            "lakeflow_compaction_runs", "Compaction runs by result (ok, error, busy: another holds the lease).",
            ["table", "result"], registry=r,
        )  # fmt: skip
        self.rows_in = Counter("lakeflow_compaction_rows_in", "Readings read by committed runs.", TABLE, registry=r)
        self.rows_out = Counter(
            "lakeflow_compaction_rows_out", "Rows committed to the Iceberg table.", TABLE, registry=r
        )
        self.files_compacted = Counter(
            "lakeflow_compaction_files_compacted", "Raw part files compacted by committed runs.", TABLE, registry=r
        )
        self.files_quarantined = Counter(
            "lakeflow_compaction_files_quarantined", "Raw part files quarantined (malformed, empty).", TABLE, registry=r
        )
        self.duration = Histogram(
            "lakeflow_compaction_run_duration_seconds",
            "Duration of compaction runs that held the lease.",
            TABLE,
            buckets=DURATION_BUCKETS,
            registry=r,
        )
        self.last_success = Gauge(
            "lakeflow_compaction_last_success_timestamp_seconds",
            "When the last run committed (Unix time).",
            TABLE,
            registry=r,
        )
        self.freshness_lag = Gauge(
            "lakeflow_compaction_freshness_lag_seconds",
            "Age of the oldest raw part file found and not compacted yet (0 after a run that committed "
            "everything it found).",
            TABLE,
            registry=r,
        )
        self.newest_event_time = Gauge(
            "lakeflow_table_newest_event_timestamp_seconds",
            "The newest event time among the Iceberg table's rows (Unix time; NaN until a run has read it).",
            TABLE,
            registry=r,
        )
        self.end_to_end_lag = Gauge(
            "lakeflow_end_to_end_lag_seconds",
            "Now minus the newest event time visible in the Iceberg table: how far the table trails its "
            "sources, as make bench-freshness measures it (NaN until a run has read it).",
            TABLE,
            registry=r,
        )
        self.commit_lag = Gauge(
            "lakeflow_compaction_commit_lag_seconds",
            "The last commit's time minus the newest event time among the rows it committed.",
            TABLE,
            registry=r,
        )
        self.running = Gauge("lakeflow_compaction_running", "1 while a compaction run is in progress.", registry=r)
        self.lease_busy = Gauge(
            "lakeflow_compaction_lease_busy",
            "1 when the last run was refused because another compaction holds the table's lease.",
            TABLE,
            registry=r,
        )
        self.snapshots = Gauge(
            "lakeflow_table_snapshots", "Snapshots of the compacted Iceberg table.", TABLE, registry=r
        )
        self.data_files = Gauge(
            "lakeflow_table_data_files", "Data files of the compacted table's current snapshot.", TABLE, registry=r
        )
        self.maintenance = Counter(
            "lakeflow_maintenance_removed",
            "What maintenance removed: snapshots_expired, orphans_removed, uploads_aborted (the raw table's "
            "open multipart uploads), in_progress_removed (its hidden in-progress part files).",
            ["table", "kind"],
            registry=r,
        )
        self.leftovers_kept = Gauge(
            "lakeflow_maintenance_leftovers_too_young",
            "Open uploads and in-progress files of the raw table the last maintenance kept (younger than the "
            "minimum age).",
            TABLE,
            registry=r,
        )
        self.leftovers_denied = Gauge(
            "lakeflow_maintenance_leftovers_denied",
            "Old open uploads and in-progress files of the raw table the last maintenance was refused to remove "
            "(its principal holds no modify on the raw table: lakeflow maintain --raw-leftovers-only).",
            TABLE,
            registry=r,
        )
        self._times: dict[str, TableTimes] = {}

    def follow(self, table: str) -> TableTimes:
        """``table``'s series, exported from now on (at 0, the lags computed at each scrape), and its times."""
        if table in self._times:
            return self._times[table]
        times = self._times[table] = TableTimes()
        for result in ("ok", "error", "busy"):
            self.runs.labels(table, result)
        for kind in MAINTENANCE_KINDS:
            self.maintenance.labels(table, kind)
        for metric in (
            self.rows_in, self.rows_out, self.files_compacted, self.files_quarantined, self.duration,
            self.last_success, self.commit_lag, self.lease_busy, self.snapshots, self.data_files,
            self.leftovers_kept, self.leftovers_denied,
        ):  # fmt: skip
            metric.labels(table)
        self.freshness_lag.labels(table).set_function(times.freshness_lag)
        self.newest_event_time.labels(table).set_function(times.newest_event_time)
        self.end_to_end_lag.labels(table).set_function(times.end_to_end_lag)
        return times

    def committed(self, table: str, report: Mapping[str, Any]) -> None:
        """The table's newest event time and the commit's lag, from a run's report: at its commit (the
        service's runs tell it then, before their tidy-up and maintenance) and when it ends."""
        times = self.follow(table)
        if report.get("newest_event_ms") is not None:
            times.newest_event = report["newest_event_ms"] / 1000
        if report.get("commit_lag_s") is not None:
            self.commit_lag.labels(table).set(report["commit_lag_s"])

    def record(self, table: str, report: Mapping[str, Any], code: int, took_s: float) -> None:
        """Count one run of ``table`` (``namespace.table``) from its exit code and JSON report (empty when
        it wrote none)."""
        times = self.follow(table)
        result = RESULTS.get(code, "error")
        self.runs.labels(table, result).inc()
        self.lease_busy.labels(table).set(result == "busy")
        if result == "busy":
            return
        self.duration.labels(table).observe(float(report.get("duration_s") or took_s))
        if result == "ok":
            self.last_success.labels(table).set(time.time())
            times.oldest_pending = None
            self.rows_in.labels(table).inc(report.get("rows_in", 0))
            self.rows_out.labels(table).inc(report.get("rows_out", 0))
            self.files_compacted.labels(table).inc(report.get("files_compacted", 0))
            self.files_quarantined.labels(table).inc(report.get("files_quarantined", 0))
        elif report.get("oldest_new_file_at"):
            found = datetime.fromisoformat(report["oldest_new_file_at"]).timestamp()
            times.oldest_pending = found if times.oldest_pending is None else min(times.oldest_pending, found)
        self.committed(table, report)
        if report.get("table_snapshots") is not None:
            self.snapshots.labels(table).set(report["table_snapshots"])
        if report.get("table_data_files") is not None:
            self.data_files.labels(table).set(report["table_data_files"])
        maintenance = report.get("maintenance") or {}
        for kind in MAINTENANCE_KINDS:
            self.maintenance.labels(table, kind).inc(maintenance.get(kind, 0))
        if maintenance:
            self.leftovers_kept.labels(table).set(maintenance.get("leftovers_too_young", 0))
            self.leftovers_denied.labels(table).set(maintenance.get("leftovers_denied", 0))


def read_report(path: Path) -> dict[str, Any]:
    """A run's JSON report (empty when the run wrote none: it failed before it could)."""
    try:
        report = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return report if isinstance(report, dict) else {}


def serve(metrics: CompactorMetrics, port: int, host: str):
    """Serve ``metrics`` at ``http://host:port/metrics`` from a daemon thread; returns the server
    (``shutdown()`` it when done)."""
    from prometheus_client import start_http_server

    try:
        server, _ = start_http_server(port, addr=host, registry=metrics.registry)
    except OSError as exc:
        raise MetricsPortUnavailable(f"cannot serve metrics on {host}:{port}: {exc.strerror or exc}") from None
    return server


def export_once(metrics: CompactorMetrics, textfile: Path | None, pushgateway: str | None) -> None:
    """A single run's figures: written as a node_exporter textfile (replaced atomically) and/or pushed
    to a Pushgateway (group ``job=lakeflow_compact``, replaced by each push)."""
    if textfile is not None:
        from prometheus_client import write_to_textfile

        textfile.parent.mkdir(parents=True, exist_ok=True)
        write_to_textfile(str(textfile), metrics.registry)
    if pushgateway is not None:
        from prometheus_client import push_to_gateway

        push_to_gateway(pushgateway, job=PUSH_JOB, registry=metrics.registry, timeout=10)
