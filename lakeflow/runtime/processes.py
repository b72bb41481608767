"""Local daemon processes (Linux ``/proc``): what a pid runs, and stopping a set of them.

The cluster managers (:mod:`lakeflow.runtime.flink_cluster`, :mod:`lakeflow.runtime.spark_cluster`) count a pid as
theirs only while its command line shows their daemon; these helpers are what they share.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Sequence
from pathlib import Path


def cmdline(pid: int) -> list[str]:
    """A process's argv; empty when it is gone, a zombie, or not ours to read."""
    try:
        return [a for a in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0") if a]
    except OSError:
        return []


def environ(pid: int) -> list[bytes]:
    """A process's environment entries (``NAME=value``); empty when it is gone or not ours to read."""
    try:
        return Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return []


def parent(pid: int) -> int:
    """A process's parent pid (0 when it is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0
    return int(stat.rsplit(")", 1)[1].split()[1])  # after "pid (comm) state": ppid


def all_pids() -> list[int]:
    return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]


def signal_all(pids: Sequence[int], sig: signal.Signals) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def stop_all(pids: Sequence[int], alive: Callable[[int], bool], timeout: float) -> None:
    """SIGTERM ``pids``; SIGKILL those still ``alive`` after ``timeout`` seconds."""
    signal_all(pids, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    left = list(pids)
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = [pid for pid in left if alive(pid)]
    signal_all(left, signal.SIGKILL)


def kill_first(pids: Sequence[int], what: str) -> int:
    """SIGKILL the first of ``pids`` (fault injection); return it. ``what`` names them in the error."""
    if not pids:
        raise RuntimeError(f"no {what} running")
    os.kill(pids[0], signal.SIGKILL)
    return pids[0]
