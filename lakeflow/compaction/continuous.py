"""``lakeflow compact --every DURATION``: compact on a schedule until SIGTERM / Ctrl+C.

Each tick runs the job exactly as a single ``lakeflow compact`` does (``run_once``: jobs/compact.py's
pipeline called in this process, settings and credentials read afresh), then sleeps until the next tick. A signal
during a run lets it finish — its commit included — and then ends the loop (exit 0); a signal while
sleeping ends it at once; a second signal stops the process at once. A run refused because another
holds the lease (exit 3), or failing (exit 2), is a log line; the next tick tries again. With
``maintain_every``, a run that is due also maintains the table, under its own lease (``--maintain``).
One line per run on stdout: when, files, rows, duration, result. With ``metrics_port``, the runs'
figures are served for Prometheus (:mod:`lakeflow.compaction.metrics`), each table's apart, until the
loop ends.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import io
import logging
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from types import FrameType
from typing import Any, NamedTuple, TextIO

log = logging.getLogger("lakeflow.compaction.continuous")

SLICE_S = 0.2  # a signal ends the sleep within this long
METRICS_HOST = "0.0.0.0"  # the metrics port listens on every interface, for Prometheus to reach it
RESULTS = {0: "ok", 2: "error", 3: "busy (another run holds the lease)"}
OnCommit = Callable[[Mapping[str, Any]], None]  # a run tells its report at its commit (the metrics hear it)


@dataclass(frozen=True)
class Schedule:
    """How often to run, and to maintain (None: never; the first due run maintains)."""

    every_s: float
    maintain_every_s: float | None = None


class StopSignal:
    """SIGTERM / SIGINT ask the loop to stop: ``requested`` is set; a second one stops at once. (A
    plain flag: a handler taking a lock the interrupted code may hold, as ``threading.Event`` does,
    could deadlock.)"""

    def __init__(self, out: TextIO) -> None:
        self.out = out  # stdout, also while a run's own output is redirected
        self.requested = False
        self.running = False  # a run is in progress: let it finish
        self._previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}

    def __enter__(self) -> StopSignal:
        for sig in self._previous:
            signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if self.requested:
            print(f"{_now()} {name} again: stopping at once", file=self.out, flush=True)
            for sig, handler in self._previous.items():
                signal.signal(sig, handler)
            signal.raise_signal(signum)
            return
        self.requested = True
        print(
            f"{_now()} {name}: " + ("finishing the run in progress, then exiting" if self.running else "exiting"),
            file=self.out,
            flush=True,
        )


class Served(NamedTuple):
    """A stream the compactor serves: its name (None: the settings' one stream), its Iceberg table
    (``namespace.table``: its metrics' ``table`` label) and its own period (None: the schedule's)."""

    name: str | None
    table: str
    every_s: float | None = None


StreamRun = Callable[[str | None, Path, bool, OnCommit], int]  # (stream, report, maintain, on_commit) → exit code
StreamList = Callable[[], Sequence[Served]]  # asked each tick


def run_forever(
    schedule: Schedule,
    run_once: StreamRun,
    streams: StreamList,
    report_path: Path | None = None,
    metrics_port: int | None = None,
) -> int:
    """Run ``run_once(stream, report, maintain, on_commit)`` for each of ``streams()`` (asked afresh
    each tick: a topic pattern's new tables join) every ``schedule.every_s`` (or the stream's own
    period) until a stop signal; returns 0. A stream's failure is its run's line; the others go on.
    Each run's JSON report goes to ``report_path`` (replaced by the next run's) or a temporary file,
    and its figures into its table's metrics served on ``metrics_port`` (all interfaces; none when None);
    ``maintain``: whether the run also maintains its table; ``on_commit``: what the run tells its
    report at its commit (the table's newest event time reaches the metrics then)."""
    from lakeflow.compaction.engine import end_pass
    from lakeflow.compaction.metrics import CompactorMetrics, read_report, serve  # prometheus_client: not for --help

    last_maintain: dict[str | None, float] = {}
    due: dict[str | None, float] = {}
    metrics = CompactorMetrics()
    with contextlib.ExitStack() as stack:
        stop = stack.enter_context(StopSignal(sys.stdout))
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="lakeflow-compact-"))
        report = report_path or Path(tmp) / "report.json"
        if metrics_port is not None:
            stack.callback(serve(metrics, metrics_port, METRICS_HOST).shutdown)
        print(
            f"{_now()} compacting every {schedule.every_s:g} s"
            + (f", maintaining every {schedule.maintain_every_s:g} s" if schedule.maintain_every_s else "")
            + (f", metrics on port {metrics_port} (/metrics)" if metrics_port is not None else "")
            + " (SIGTERM / Ctrl+C: finish the run in progress and exit)",
            flush=True,
        )
        while not stop.requested:
            tick = time.monotonic()
            try:
                listed = list(streams())
            except Exception as exc:  # e.g. the catalog that lists a pattern's tables is down: next tick
                log.warning("cannot list the streams: %s", exc)
                listed = []
                due = {name: tick + schedule.every_s for name in due}
            for served in listed:
                metrics.follow(served.table)  # its series from the first scrape on, its counters at 0
            for name, table, every_s in listed:
                if stop.requested or due.get(name, tick) > tick:
                    continue
                started = time.monotonic()
                due[name] = started + (every_s or schedule.every_s)
                maintain = schedule.maintain_every_s is not None and (
                    name not in last_maintain or started - last_maintain[name] >= schedule.maintain_every_s
                )
                report.unlink(missing_ok=True)
                stop.running = True
                metrics.running.set(1)
                try:
                    code = _quietly(run_once, name, report, maintain, functools.partial(metrics.committed, table))
                except Exception:  # an unexpected failure of one run: logged, and the next tick tries again
                    log.exception("compaction run failed")
                    code = 2
                finally:
                    stop.running = False
                    metrics.running.set(0)
                if maintain and code == 0:
                    last_maintain[name] = started
                took_s = time.monotonic() - started
                figures = read_report(report)
                metrics.record(table, figures, code, took_s)
                print(run_line(figures, code, took_s, maintain and code == 0, name), flush=True)
            end_pass()  # the Spark application this tick's runs shared
            # What the tick's runs left is freed now, not at Python's next full collection, which in a
            # long-lived process comes rarely: a run's pyiceberg tables and FileIOs sit in reference cycles
            # and hold S3 filesystems whose AWS SDK clients keep eventfds open (make soak: +9 descriptors a
            # run). Once a tick, not a run: a full collection costs ~60 ms (make bench-fleet, 50 tables).
            gc.collect()
            release_unused()
            wake = min(due.values(), default=tick + schedule.every_s)
            while not stop.requested and time.monotonic() < wake:
                time.sleep(min(SLICE_S, max(0.0, wake - time.monotonic())))
    return 0


def release_unused() -> None:
    """Hand the memory Arrow's allocator keeps for reuse back to the system between runs: a run's batches
    are freed (nothing stays allocated), but the allocator may hold their pages, and the service's RSS then
    swings with the last run's batch, not its working set (~30 MiB less with mimalloc, measured over 40
    runs; docs/operations.md)."""
    arrow = sys.modules.get("pyarrow")  # a run that loaded it; the loop itself loads nothing
    if arrow is not None:
        arrow.default_memory_pool().release_unused()


def _quietly(run_once: StreamRun, stream: str | None, report: Path, maintain: bool, on_commit: OnCommit) -> int:
    """One run with its multi-line summary kept off stdout (the JSON report has it)."""
    with contextlib.redirect_stdout(io.StringIO()):
        return run_once(stream, report, maintain, on_commit)


def run_line(r: Mapping[str, Any], code: int, took_s: float, maintained: bool, stream: str | None = None) -> str:
    """The run's one line (``r``: its JSON report): time, the stream, files, rows, duration, result."""
    result = RESULTS.get(code, f"exit {code}")
    parts = [
        _now(),
        *([f"stream {stream}"] if stream else []),
        f"run {r.get('run_id', '-')}",
        f"files {r.get('files_in', 0)}",
        f"rows {r.get('rows_out', 0)}",
        f"{took_s:.2f}s",
        result,
    ]
    if maintained:
        parts.append("maintained")
    return " ".join(parts)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
