"""What a benchmark ran on, printed at its start so that figures of two runs can be told apart: the
processor, its cores and frequency governor, the load when the bench started (a busy machine shifts
every ratio), the memory, and the Python and Java that ran. Linux ``/proc`` and ``/sys`` only."""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path


def _first(path: str, key: str) -> str:
    try:
        for line in Path(path).read_text().splitlines():
            if line.startswith(key):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "?"


def _read(path: str) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return "?"


def _java() -> str:
    try:
        done = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return "?"
    return (done.stderr.splitlines() or ["?"])[0].replace('"', "")


def machine() -> dict[str, str]:
    """The facts :func:`describe` prints, by name."""
    mem_kib = _first("/proc/meminfo", "MemTotal").split()[0]
    load = os.getloadavg()
    return {
        "cpu": _first("/proc/cpuinfo", "model name"),
        "cores": str(os.cpu_count()),
        "governor": _read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),
        "load": f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}",
        "memory": f"{int(mem_kib) / 2**20:.1f} GiB" if mem_kib.isdigit() else "?",
        "python": platform.python_version(),
        "java": _java(),
        "kernel": platform.release(),
    }


def describe() -> str:
    """One line: ``ran on: cpu …, cores …, load (1/5/15 min) …, …``."""
    facts = machine()
    return "ran on: " + ", ".join(f"{k} {v}" for k, v in facts.items())
