"""The ingestion job's flags and its main around them: ``jobs/sensor_ingest.py`` (``make run``, ``flink run``)
parses its command line here, as ``jobs/compact.py`` does in :mod:`lakeflow.cli.compact`; a failure lakeflow
knows is one line and exit code 2 (:func:`lakeflow.cli.main.run_command`)."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from lakeflow.cli.main import EXIT_INTERRUPTED, run_command
from lakeflow.cli.output import shown


@dataclass(frozen=True)
class IngestArgs:
    """What the job's command line asks for."""

    local: bool = False  # the embedded local catalog even when LAKEKEEPER is configured
    parallelism: int | None = None  # source and sink parallelism (None: Flink's default)


def job_arguments(argv: Sequence[str] | None, description: str) -> IngestArgs:
    """``jobs/sensor_ingest.py``'s flags."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--local", action="store_true", help="use the embedded local catalog even when LAKEKEEPER is configured"
    )
    parser.add_argument(
        "--parallelism", type=int, default=None, help="source and sink parallelism (default: Flink's; -p on flink run)"
    )
    args = parser.parse_args(argv)
    return IngestArgs(local=args.local, parallelism=args.parallelism)


def run_job(job: Callable[[IngestArgs], bool], argv: Sequence[str] | None, description: str) -> int:
    """The job's main: its flags → one run of ``job`` (which returns whether it ran on a cluster), then the
    next commands; known failures one line."""
    args = job_arguments(argv, description)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stderr)
    logging.getLogger("lakeflow").setLevel(logging.INFO)

    def run() -> None:
        print(next_steps(on_cluster=job(args)), flush=True)

    try:
        return run_command("sensor_ingest", run)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


def next_steps(on_cluster: bool) -> str:
    """The one or two natural next commands after a run."""
    if on_cluster:
        return "Next: make compact (the part files → the Iceberg table), then make harvest (this cluster's jobs and lineage)"
    return (
        f"Next: make compact (the part files → the Iceberg table), then {shown('query')} (SQL over it); "
        "make demo runs the whole chain on a Flink cluster, lineage page included"
    )
