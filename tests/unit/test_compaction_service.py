"""``lakeflow compact --every``'s loop (lakeflow/compaction/continuous.py) in this process, its runs
stand-ins: what a run leaves is freed before the next, and each run hears of its commit.

Unit tests: they start no process. The real-process tests: tests/integration/test_compaction_service.py."""

from __future__ import annotations

import gc
import signal
import weakref
from pathlib import Path
from typing import Any, Callable

from lakeflow.compaction.continuous import Schedule, run_forever


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
        assert run_forever(Schedule(every_s=0), run_once, report_path=tmp_path / "report.json") == 0
    finally:
        if enabled:
            gc.enable()
    assert freed_before_next == [True, True]
    assert all(getattr(h, "__name__", "") == "committed" for h in heard)  # the metrics' own
