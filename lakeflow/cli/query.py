"""``lakeflow query "SQL"``: SQL (DuckDB) over the compacted Iceberg table (:mod:`lakeflow.query`),
printed as a table, CSV or JSON."""

from __future__ import annotations

import argparse
import csv
import json
import sys
from datetime import date, datetime, time, timezone
from typing import TYPE_CHECKING

from lakeflow.cli.main import EXIT_ERROR
from lakeflow.query import VIEW

if TYPE_CHECKING:
    import pyarrow as pa

FORMATS = ("table", "csv", "json")
DEFAULT_TABLE_ROWS = 50


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``lakeflow query`` to the ``lakeflow`` parser."""
    p = subparsers.add_parser(
        "query",
        help=f"run SQL (DuckDB) over the compacted Iceberg table, exposed as {VIEW!r}",
        description=f"Read the compacted Iceberg table (COMPACT_TABLE, default TABLE-compacted) with "
        f"pyiceberg — only the partitions a time filter selects — and run SQL on it with DuckDB, the "
        f"table exposed as {VIEW!r} (its columns: the declared schema's, TABLE_SCHEMA; `lakeflow schema "
        f"show` lists them). Times are UTC. Exit codes: 0 done, 2 error (no table, bad SQL).",
    )
    p.add_argument(
        "sql",
        nargs="?",
        help="the SQL (default: records, first and last event time per value of the key's first field)",
    )
    p.add_argument(
        "--day",
        type=date.fromisoformat,
        metavar="YYYY-MM-DD",
        help="read only this UTC day's records (same as --since DAY --until DAY+1)",
    )
    p.add_argument(
        "--since",
        type=instant,
        metavar="TIME",
        help="read only records with an event time at or after TIME (ISO date or date-time; UTC unless it "
        "has an offset)",
    )
    p.add_argument("--until", type=instant, metavar="TIME", help="read only records with an event time before TIME")
    p.add_argument("--format", choices=FORMATS, default="table", help="output format (default table)")
    p.add_argument(
        "--max-rows",
        type=int,
        metavar="N",
        help=f"print at most N rows, 0 for all (default {DEFAULT_TABLE_ROWS} for table, all for csv/json)",
    )
    p.add_argument(
        "--stream",
        metavar="NAME",
        help="the pipeline's stream whose Iceberg table to read: a stream's name, or one table of a "
        "topic-pattern stream (needed when PIPELINE declares several)",
    )
    p.add_argument(
        "--target-table",
        metavar="NAME",
        help="Iceberg table name in NAMESPACE ($COMPACT_TABLE; default: TABLE-compacted)",
    )
    p.add_argument("--local", action="store_true", help="use the embedded local catalog")
    p.set_defaults(handler=_query)


def instant(text: str) -> datetime:
    """An ISO date (midnight) or date-time; UTC unless it carries an offset (``Z`` included)."""
    raw = text.strip()
    if raw[-1:] in ("Z", "z"):  # fromisoformat takes "Z" but not "z"
        raw = raw[:-1] + "+00:00"
    try:
        value = datetime.fromisoformat(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected an ISO date or date-time, e.g. 2025-11-21T08:00"
        ) from None
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)


def _query(args: argparse.Namespace) -> int:
    from lakeflow.compaction.config import CompactOptions, load_config
    from lakeflow.query import QueryError, day_bounds, default_sql, load_readings, run_sql

    if args.day and (args.since or args.until):
        print("lakeflow query: --day cannot be combined with --since/--until", file=sys.stderr)
        return EXIT_ERROR
    if args.max_rows is not None and args.max_rows < 0:
        print("lakeflow query: --max-rows must be 0 (all) or more", file=sys.stderr)
        return EXIT_ERROR
    since, until = day_bounds(args.day) if args.day else (args.since, args.until)
    config = load_config(CompactOptions(stream=args.stream, target_table=args.target_table, local=args.local))
    try:
        result = run_sql(load_readings(config, since, until), args.sql or default_sql(config.schema))
    except QueryError as exc:
        print(f"lakeflow query: {exc}", file=sys.stderr)
        return EXIT_ERROR
    if result is not None:
        render(result, args.format, args.max_rows)
    return 0


def _plain(value: object) -> object:
    return value.isoformat() if isinstance(value, (date, datetime, time)) else value


def render(result: pa.Table, fmt: str, max_rows: int | None) -> None:
    """Print ``result`` on stdout as an aligned table (DuckDB's), CSV or a JSON array, at most
    ``max_rows`` rows (None: the format's default, 0: all), then say how many were left out."""
    limit = max_rows if max_rows is not None else DEFAULT_TABLE_ROWS if fmt == "table" else 0
    shown = result.slice(0, limit) if limit else result
    if fmt == "table":
        _show(shown)
    elif fmt == "csv":
        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerow(shown.column_names)
        writer.writerows([_plain(v) for v in row.values()] for row in shown.to_pylist())
    else:
        json.dump([{k: _plain(v) for k, v in row.items()} for row in shown.to_pylist()], sys.stdout, default=str)
        print()
    left = result.num_rows - shown.num_rows
    if left:
        print(
            f"… {left} more row{'s' * (left != 1)} (--max-rows 0 prints all)",
            file=sys.stdout if fmt == "table" else sys.stderr,
        )


def _show(table: pa.Table) -> None:
    """DuckDB's box rendering of ``table`` on stdout: every row, no column cut short."""
    import duckdb

    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    sys.stdout.flush()
    con.from_arrow(table).show(max_rows=max(table.num_rows, 1), max_width=1_000_000)
