"""One compaction per target table at a time on this host: an exclusive ``flock`` in LAKEFLOW_HOME.

The lock is held for the whole run and released by the kernel when the process ends, even on a
crash. Across hosts the Iceberg commit's optimistic check still rejects a run whose table moved
underneath it (see docs/compaction.md).
"""

from __future__ import annotations

import fcntl
import os
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator


class CompactionBusy(RuntimeError):
    """Another compaction of the same target table holds the lock."""


@contextmanager
def run_lock(path: Path, what: str) -> Iterator[None]:
    """Hold the lock at ``path`` for the duration of the block; raise CompactionBusy if taken."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            holder = f.read().strip() or "unknown process"
            raise CompactionBusy(f"another compaction of {what} is running ({holder}); "
                                 f"lock file {path}") from None
        f.seek(0)
        f.truncate()
        f.write(f"pid {os.getpid()}, since {datetime.now(timezone.utc).isoformat(timespec='seconds')}")
        f.flush()
        try:
            yield
        finally:
            f.truncate(0)
            fcntl.flock(f, fcntl.LOCK_UN)
