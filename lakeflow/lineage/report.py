"""The harvest report: jobs seen / filtered / processed / failed, edges, unresolved per job, timings."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass
class HarvestReport:
    jobs_seen: int = 0
    filtered_by_name: int = 0
    filtered_by_state: int = 0
    jobs_processed: int = 0
    jobs_failed: dict[str, str] = field(default_factory=dict)  # job id → error
    compaction_runs: int = 0
    native_runs: int = 0  # Flink runs pushed by the native-lineage listener, merged by job id
    edges: int = 0
    unresolved: dict[str, list[str]] = field(default_factory=dict)  # "name (job id)" → reasons
    removed: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    timings_s: dict[str, float] = field(default_factory=dict)

    @contextmanager
    def timed(self, step: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.timings_s[step] = round(self.timings_s.get(step, 0.0) + time.perf_counter() - t0, 3)

    def lines(self) -> list[str]:
        """The report as text lines (stderr)."""
        out = [
            (
                f"jobs: {self.jobs_seen} seen, {self.filtered_by_name} filtered by name, "
                f"{self.filtered_by_state} filtered by state, {self.jobs_processed} processed, "
                f"{len(self.jobs_failed)} failed; {self.compaction_runs} compaction runs; "
                f"{self.native_runs} pushed Flink runs; {self.edges} lineage edges"
            )
        ]
        out += [f"  failed {jid}: {err}" for jid, err in sorted(self.jobs_failed.items())]
        for job, reasons in sorted(self.unresolved.items()):
            out += [f"  unresolved in {job}: {r}" for r in reasons]
        out += [f"  removed (stale): {urn}" for urn in self.removed]
        out += [f"  warning: {w}" for w in self.warnings]
        out.append("timings: " + ", ".join(f"{k} {v:.2f}s" for k, v in self.timings_s.items()))
        return out
