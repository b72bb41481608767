"""What the scenarios share: their result line, the servers they start, and the lakeflow CLI."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Mapping

from tests.support.fixtures_servers import MotoServer, run_moto

REPO = Path(__file__).resolve().parents[2]
LAKEFLOW = str(Path(sys.executable).parent / "lakeflow")


@dataclass
class Result:
    """A scenario's counts (printed in order), which of them must be zero, and failed checks."""

    name: str
    counts: dict[str, object] = field(default_factory=dict)
    zeros: tuple[str, ...] = ()
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.problems and all(self.counts.get(k) == 0 for k in self.zeros)

    def check(self, condition: bool, problem: str) -> None:
        """Record ``problem`` unless ``condition`` holds."""
        if not condition:
            self.problems.append(problem)

    def line(self) -> str:
        text = f"{self.name}: " + " ".join(f"{k}={v}" for k, v in self.counts.items())
        text += f" ({self.seconds:.0f} s)"
        broken = [k for k in self.zeros if self.counts.get(k) != 0]
        if broken:
            text += f"  FAILED: expected {', '.join(f'{k}=0' for k in broken)}"
        if self.problems:
            text += "  FAILED: " + "; ".join(self.problems)
        return text


@contextmanager
def timed(result: Result) -> Iterator[Result]:
    """Time the scenario, turn an unexpected exception into a problem, print the summary line."""
    started = time.monotonic()
    try:
        yield result
    except Exception as exc:  # a crash of the scenario is a failed scenario, reported, not raised
        result.problems.append(f"{type(exc).__name__}: {exc}"[:500])
    finally:
        result.seconds = time.monotonic() - started
        print(result.line(), flush=True)


def progress(name: str, message: str) -> None:
    """A progress line on stderr (the summary lines go to stdout)."""
    print(f"  [{name}] {message}", file=sys.stderr, flush=True)


@contextmanager
def moto_server(workdir: Path, *, strict_bootstrap_calls: int = 0) -> Iterator[MotoServer]:
    """moto's S3 + STS server on a free 127.0.0.1 port (auth enforced after N calls if asked)."""
    with run_moto(workdir, strict_bootstrap_calls=strict_bootstrap_calls) as server:
        yield server


def lakeflow(env: Mapping[str, str], *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run the ``lakeflow`` CLI in a fresh process."""
    return subprocess.run([LAKEFLOW, *args], env=dict(env), capture_output=True, text=True, timeout=timeout)


def local_env(home: Path, **extra: str) -> dict[str, str]:
    """An environment for lakeflow's jobs on the embedded local catalog under ``home``."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("LAKEKEEPER", "WAREHOUSE_ID", "TOKEN", "OAUTH_", "COMPACT_", "LAKEFLOW_"))}
    return {**env, "LAKEFLOW_HOME": str(home), "LAKEFLOW_ENV_FILE": os.devnull,
            "SPARK_LOCAL_IP": "127.0.0.1", "PYTHONPATH": str(REPO), **extra}


def tail(text: str, lines: int = 8) -> str:
    return " | ".join(text.strip().splitlines()[-lines:])
