"""``lakeflow compact --every``'s loop (lakeflow/compaction/continuous.py) in this process, its runs
stand-ins: what a run leaves is freed before the next, each run hears of its commit, and each stream's
figures go to its own table's metrics.

Unit tests: they start no process. The real-process tests: tests/integration/test_compaction_service.py."""

from __future__ import annotations

import gc
import json
import signal
import weakref
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from lakeflow.compaction.continuous import Schedule, Served, run_forever
from lakeflow.compaction.metrics import CompactorMetrics

ONE = [Served(None, "iot.sensor-readings-compacted")]


class _Client:
    """Stands for a run's catalog client or S3 filesystem: unreachable once the run ends, but in a cycle."""

    def __init__(self) -> None:
        self.me = self


def test_what_a_run_leaves_in_reference_cycles_is_freed_before_the_next(tmp_path: Path) -> None:
    """In a long-lived process Python's full collection comes rarely: the loop collects after each run
    (make soak found the compactor's descriptors growing by 9 a run without it)."""
    left: list[weakref.ref] = []
    freed_before_next: list[bool] = []
    heard: list[Callable[[Any], None]] = []

    def run_once(stream: str | None, report: Path, maintain: bool, on_commit: Callable[[Any], None]) -> int:
        heard.append(on_commit)
        if left:
            freed_before_next.append(left[-1]() is None)
        left.append(weakref.ref(_Client()))
        if len(left) == 3:
            signal.raise_signal(signal.SIGTERM)  # the loop ends after this run
        return 0

    enabled = gc.isenabled()
    gc.disable()  # no automatic collection: only the loop's own
    try:
        assert run_forever(Schedule(every_s=0), run_once, lambda: ONE, tmp_path / "report.json") == 0
    finally:
        if enabled:
            gc.enable()
    assert freed_before_next == [True, True]
    assert all(isinstance(h, partial) and h.func.__name__ == "committed" and h.args == (ONE[0].table,)
               for h in heard)  # the metrics' own, for the run's table


def test_a_failing_stream_fails_alone_in_its_tables_metrics(tmp_path: Path) -> None:
    """Two streams, one whose runs fail: the other's figures still advance, each in its own table's
    series, and the failing one's error counter moves."""
    streams = [Served("vibration", "plant.vibration-compacted"), Served("meters", "plant.meters-compacted")]
    ran: list[str | None] = []
    services: list[CompactorMetrics] = []

    def run_once(stream: str | None, report: Path, maintain: bool, on_commit: Callable[[Any], None]) -> int:
        ran.append(stream)
        services.append(on_commit.func.__self__)  # the loop's metrics (on_commit: their committed)
        if len(ran) == 4:
            signal.raise_signal(signal.SIGTERM)  # the loop ends after this run: two ticks
        if stream == "meters":
            return 2  # e.g. its catalog is down: no report, and the loop still knows its table
        report.write_text(json.dumps({"rows_in": 5, "rows_out": 5, "files_compacted": 1, "duration_s": 0.1}))
        return 0

    assert run_forever(Schedule(every_s=0), run_once, lambda: streams, tmp_path / "report.json") == 0
    assert ran == ["vibration", "meters"] * 2
    metrics = services[0]
    assert all(m is metrics for m in services)

    def sample(name: str, table: str, **labels: str) -> float | None:
        return metrics.registry.get_sample_value(name, {"table": table, **labels})

    vibration, meters = (s.table for s in streams)
    assert sample("lakeflow_compaction_rows_out_total", vibration) == 10
    assert sample("lakeflow_compaction_runs_total", vibration, result="ok") == 2
    assert sample("lakeflow_compaction_runs_total", vibration, result="error") == 0
    assert sample("lakeflow_compaction_runs_total", meters, result="error") == 2
    assert sample("lakeflow_compaction_runs_total", meters, result="ok") == 0
    assert sample("lakeflow_compaction_rows_out_total", meters) == 0
    assert sample("lakeflow_compaction_last_success_timestamp_seconds", vibration) > 0
    assert sample("lakeflow_compaction_last_success_timestamp_seconds", meters) == 0
