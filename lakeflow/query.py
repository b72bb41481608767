"""``lakeflow query "SQL"``: SQL (DuckDB) over the compacted Iceberg table, exposed as ``readings``.

pyiceberg plans and reads the scan: ``--day``/``--since``/``--until`` become a row filter on ``ts``,
so only the data files of matching ``ts_day`` partitions are opened. Its reader honours Iceberg's
field ids and delete files and uses the catalog's FileIO (vended S3 credentials included), the same
for the embedded catalog and Lakekeeper. DuckDB then runs the SQL on the Arrow table in memory:
memory grows with the rows read (about 0.4 GB peak for 2,000,000 readings), so narrow a big table
with a time filter.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from datetime import date, datetime, time, timedelta, timezone
from typing import TYPE_CHECKING

from lakeflow.errors import LakeflowError

if TYPE_CHECKING:
    import pyarrow as pa

VIEW = "readings"
DEFAULT_SQL = (
    f"SELECT sensor_id, count(*) AS readings, min(ts) AS first, max(ts) AS last, "
    f"round(avg(temperature), 2) AS avg_temperature FROM {VIEW} GROUP BY sensor_id ORDER BY sensor_id"
)
FORMATS = ("table", "csv", "json")
DEFAULT_TABLE_ROWS = 50
EXIT_ERROR = 2


class QueryError(LakeflowError, RuntimeError):
    """The table cannot be read or the SQL failed; the message says why (never a credential)."""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``lakeflow query`` to the ``lakeflow`` parser."""
    p = subparsers.add_parser(
        "query",
        help=f"run SQL (DuckDB) over the compacted Iceberg table, exposed as {VIEW!r}",
        description=f"Read the compacted Iceberg table (COMPACT_TABLE, default TABLE-compacted) with "
        f"pyiceberg — only the ts_day partitions a time filter selects — and run SQL on it "
        f"with DuckDB, the table exposed as {VIEW!r} (columns sensor_id, run_id, seq, "
        f"timestamp_ms, temperature, humidity, pressure, location, ts). Times are UTC. "
        f"Exit codes: 0 done, 2 error (no table, bad SQL).",
    )
    p.add_argument(
        "sql",
        nargs="?",
        default=DEFAULT_SQL,
        help="the SQL (default: readings, first and last time, mean temperature per sensor)",
    )
    p.add_argument(
        "--day",
        type=date.fromisoformat,
        metavar="YYYY-MM-DD",
        help="read only this UTC day's partition (same as --since DAY --until DAY+1)",
    )
    p.add_argument(
        "--since",
        type=instant,
        metavar="TIME",
        help="read only readings at or after TIME (ISO date or date-time; UTC unless it has an offset)",
    )
    p.add_argument("--until", type=instant, metavar="TIME", help="read only readings before TIME")
    p.add_argument("--format", choices=FORMATS, default="table", help="output format (default table)")
    p.add_argument(
        "--max-rows",
        type=int,
        metavar="N",
        help=f"print at most N rows, 0 for all (default {DEFAULT_TABLE_ROWS} for table, all for csv/json)",
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


def time_filter(since: datetime | None = None, until: datetime | None = None) -> str:
    """The Iceberg row filter ``since <= ts < until`` (either end open), in pyiceberg's filter syntax;
    pyiceberg prunes the ``ts_day`` partitions by it."""
    from lakeflow.compaction.schema import TS

    bounds = [f"{TS} >= '{since.isoformat()}'"] if since else []
    bounds += [f"{TS} < '{until.isoformat()}'"] if until else []
    return " AND ".join(bounds) or "true"


def day_bounds(day: date) -> tuple[datetime, datetime]:
    """[midnight, next midnight) of a UTC day."""
    start = datetime.combine(day, time(), tzinfo=timezone.utc)
    return start, start + timedelta(days=1)


def load_readings(local: bool, target_table: str | None, row_filter: str) -> pa.Table:
    """The compacted table's rows matching ``row_filter`` (pyiceberg's scan, partitions pruned)."""
    from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

    from lakeflow.catalog.errors import iceberg_errors
    from lakeflow.compaction.commit import iceberg_catalog
    from lakeflow.compaction.config import load_config

    argv = (["--target-table", target_table] if target_table else []) + (["--local"] if local else [])
    config = load_config(argv)
    catalog = iceberg_catalog(config.settings)
    with iceberg_errors(f"load Iceberg table {config.target_name}"):
        try:
            table = catalog.load_table((*config.namespace, config.target_table))
        except (NoSuchTableError, NoSuchNamespaceError):
            raise QueryError(
                f"no Iceberg table {config.target_name} in the {config.settings.catalog} catalog: "
                "run `make compact` first"
            ) from None
    if table.current_snapshot() is None:
        print(
            f"lakeflow query: {config.target_name} has no rows yet (run `make compact` once readings were ingested)",
            file=sys.stderr,
        )
    return table.scan(row_filter=row_filter).to_arrow()


def run_sql(readings: pa.Table, sql: str) -> pa.Table | None:
    """Run ``sql`` with ``readings`` as the view :data:`VIEW` (times in UTC); None for a statement
    without a result."""
    import duckdb

    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.register(VIEW, readings)
    try:
        rel = con.sql(sql)
        return rel.to_arrow_table() if rel is not None else None
    except duckdb.Error as exc:
        raise QueryError(str(exc)) from None


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


def _query(args: argparse.Namespace) -> int:
    if args.day and (args.since or args.until):
        print("lakeflow query: --day cannot be combined with --since/--until", file=sys.stderr)
        return EXIT_ERROR
    if args.max_rows is not None and args.max_rows < 0:
        print("lakeflow query: --max-rows must be 0 (all) or more", file=sys.stderr)
        return EXIT_ERROR
    since, until = day_bounds(args.day) if args.day else (args.since, args.until)
    try:
        result = run_sql(load_readings(args.local, args.target_table, time_filter(since, until)), args.sql)
    except QueryError as exc:
        print(f"lakeflow query: {exc}", file=sys.stderr)
        return EXIT_ERROR
    if result is not None:
        render(result, args.format, args.max_rows)
    return 0
