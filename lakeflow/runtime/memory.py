"""How much memory this machine — or the container (cgroup) it runs in — has, and has free; and
Python's cycle collector kept off what it need not walk: paused over work that makes many objects and
while modules load, what they load frozen in a process that keeps it, nothing walked at its exit."""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

CGROUP = Path("/sys/fs/cgroup")
PROC_CGROUP = Path("/proc/self/cgroup")


def total_bytes() -> int:
    """Physical memory, or the container's limit when lower."""
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    limit = _cgroup("limit")
    return physical if limit is None else min(physical, limit)


def available_bytes() -> int:
    """Memory a new allocation can have without swapping: the kernel's ``MemAvailable`` (physical
    memory when unknown), or what is left under the container's limit when that is less."""
    try:
        meminfo = Path("/proc/meminfo").read_text().splitlines()
        free = next(int(line.split()[1]) * 1024 for line in meminfo if line.startswith("MemAvailable:"))
    except (OSError, StopIteration, ValueError):
        free = total_bytes()
    limit, used = _cgroup("limit"), _cgroup("usage")
    return free if limit is None or used is None else max(0, min(free, limit - used))


def _cgroup(name: str) -> int | None:
    """This process's cgroup memory ``limit`` or ``usage`` in bytes (v2, else v1); None when there is
    no limit or no cgroup memory controller to ask."""
    try:
        lines = PROC_CGROUP.read_text().splitlines()
    except OSError:
        return None
    files = {"limit": ("memory.max", "memory.limit_in_bytes"), "usage": ("memory.current", "memory.usage_in_bytes")}
    for line in lines:
        _, controllers, group = line.split(":", 2)
        if controllers == "":  # v2: one hierarchy
            path = CGROUP / group.lstrip("/") / files[name][0]
        elif "memory" in controllers.split(","):  # v1: the memory controller's hierarchy
            path = CGROUP / "memory" / group.lstrip("/") / files[name][1]
        else:
            continue
        try:
            value = path.read_text().strip()
        except OSError:
            continue
        return None if value == "max" else int(value)
    return None


def arrow_from_jemalloc() -> None:
    """pyarrow's allocations from here on from jemalloc rather than its default, mimalloc: a 10M-reading
    compaction spends ~0.5 s less in the kernel (faulting pages in, giving them back) on our machines.
    Nothing when ``ARROW_DEFAULT_MEMORY_POOL`` chose a pool, or this pyarrow has no jemalloc."""
    import pyarrow as pa

    if "ARROW_DEFAULT_MEMORY_POOL" not in os.environ and "jemalloc" in pa.supported_memory_backends():
        pa.set_memory_pool(pa.jemalloc_memory_pool())


_freeze_loaded = False  # what modules load stays until the process ends (see keep_loaded_modules)


def keep_loaded_modules() -> None:
    """Declare that this process keeps what it loads until it ends — the CLI's own process, the Spark
    workers' daemon; never a test process calling ``main()``: what modules make while they load
    (:func:`modules_loading`) is then frozen out of the cycle collector's reach."""
    global _freeze_loaded
    _freeze_loaded = True


@contextmanager
def modules_loading() -> Iterator[None]:
    """Import modules inside, the cycle collector paused (a full collection would walk the libraries'
    objects again and again); in a process that keeps them (:func:`keep_loaded_modules`), what they made
    is then frozen (``gc.freeze``) rather than walked by the collection that would follow (~0.07 s of a
    1M-reading compaction), and a process forked from it shares their memory pages."""
    with cycle_collector_paused():
        try:
            yield
        finally:
            if _freeze_loaded:
                gc.freeze()


@contextmanager
def cycle_collector_paused() -> Iterator[None]:
    """No cycle collection inside (reference counting still frees what is dropped; cycles wait for after).
    A compaction holds millions of objects and makes 100,000s more: each full collection would walk
    them all (~0.6 s of a 10M-reading run)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def no_collection_at_exit() -> None:
    """For a process about to end: put every object out of the cycle collector's reach, so the interpreter's
    last collection does not walk them all on the way out (~0.2 s for the libraries a compaction loads, of a
    ~2 s run); the operating system takes the memory back. Cyclic garbage made before is never collected."""
    gc.freeze()
