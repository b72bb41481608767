"""``lakeflow maintain`` (the table's care: merge small files, expire snapshots, remove orphans and
leftovers; :mod:`lakeflow.compaction.maintain`) and ``lakeflow status`` (the compaction's backlog and
the table's shape, read-only; :mod:`lakeflow.compaction.status`)."""

from __future__ import annotations

import argparse
from dataclasses import asdict, replace
from typing import Any

from lakeflow.cli.compact import add_maintain_arguments, add_table_arguments, options_of, served_streams
from lakeflow.cli.output import Output
from lakeflow.compaction.config import CompactOptions
from lakeflow.errors import LakeflowError


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``lakeflow maintain`` and ``lakeflow status`` to the ``lakeflow`` parser."""
    p = subparsers.add_parser(
        "maintain",
        help="merge the compacted table's small files, expire old snapshots, remove orphan files, clear the raw "
        "table's leftovers of killed writers",
        description="Under the table's lease: per day partition, merge small Parquet files into target-size "
        "files sorted by time (one atomic snapshot each, rows unchanged); expire old snapshots; "
        "remove files nothing references; abort the raw table's old open multipart uploads and delete its old "
        "hidden in-progress part files (which needs modify on the raw table: what the raw table's credentials "
        "may not delete is reported and left, not an error). Exit codes: 0 done, 2 error, 3 a compaction (on any "
        "host) holds the table's lease.",
    )
    add_table_arguments(p)
    add_maintain_arguments(p)
    p.add_argument(
        "--dry-run", action="store_true", help="list what would be rewritten, expired and deleted; change nothing"
    )
    p.add_argument(
        "--raw-leftovers-only",
        action="store_true",
        help="only clear the raw table's leftovers (no Iceberg table, no lease): for a principal with modify on "
        "the raw table, such as the ingestion's, when the compaction's may only read it",
    )
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(handler=_maintain)

    p = subparsers.add_parser(
        "status",
        help="the compaction's backlog and the table: pending raw files, freshness lag, last run, "
        "snapshots, files per partition",
        description="Read-only: raw files a compaction run would take now (the look-back window's discovery "
        "minus the ledger), the age of the oldest (its modification time), the last run (lineage "
        "store) and commit (ledger), the number of snapshots, and data files per day partition "
        "with their mean size. Exit codes: 0, 2 error.",
    )
    add_table_arguments(p)
    p.add_argument("--look-back", metavar="DURATION", help="as lakeflow compact --look-back")
    p.add_argument("--full-scan", action="store_true", help="list every raw bucket, as lakeflow compact --full-scan")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(handler=_status)


def _maintain(args: argparse.Namespace) -> int:
    from lakeflow.compaction.config import load_config
    from lakeflow.compaction.maintain import run_maintain, run_raw_leftovers

    config = load_config(options_of(args))
    config = replace(config, maintenance=replace(config.maintenance, dry_run=args.dry_run))
    report = run_raw_leftovers(config) if args.raw_leftovers_only else run_maintain(config)
    Output(args.json).result(report.summary_lines(), asdict(report))
    return 0


def _status(args: argparse.Namespace) -> int:
    options = options_of(args)
    streams = [s.name for s in served_streams(options)()]
    if len(streams) == 1:
        row, lines = _stream_status(options, streams[0])
        Output(args.json).result(lines, row)
        return 0
    rows: list[dict[str, Any]] = []
    for name in streams:  # a stream that cannot be read is its row's error; the others are shown
        try:
            rows.append(_stream_status(options, name)[0])
        except LakeflowError as exc:
            rows.append({"stream": name, "error": str(exc)})
    from lakeflow.compaction.status import fleet_lines

    Output(args.json).result(fleet_lines(rows), {"streams": rows})
    return 2 if any("error" in r for r in rows) else 0


def _stream_status(options: CompactOptions, stream: str | None) -> tuple[dict[str, Any], list[str]]:
    """One stream's status (:func:`lakeflow.compaction.status.table_status`) with its dead letters counted."""
    from lakeflow.compaction.config import load_config
    from lakeflow.compaction.status import table_status
    from lakeflow.dead_letters import tally

    config = load_config(replace(options, stream=stream))
    status = table_status(config)
    letters = tally(config.settings, config.stream)
    reasons = ", ".join(f"{n} {reason}" for reason, n in list(letters.reasons.items())[:3])
    lines = [*status.lines(), f"dead letters: {letters.letters}" + (f" ({reasons})" if reasons else "")]
    return {**status.to_dict(), "dead_letters": letters.letters}, lines
