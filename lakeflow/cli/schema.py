"""``lakeflow schema show`` (the declared schema as lakeflow reads it) and ``lakeflow schema plan`` (its
evolution against the compacted table, changing nothing; :mod:`lakeflow.compaction.schema_plan`)."""

from __future__ import annotations

import argparse

from lakeflow.cli.compact import add_table_arguments, options_of
from lakeflow.cli.main import EXIT_ERROR
from lakeflow.cli.output import Output


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``lakeflow schema`` to the ``lakeflow`` parser."""
    p = subparsers.add_parser(
        "schema",
        help="the declared table schema (TABLE_SCHEMA) and its evolution against the compacted table",
        description="The records' schema is declared once, as a JSON Schema file (TABLE_SCHEMA; unset: lakeflow's "
        "default sensor reading), with the table's event time, key and partitioning (docs/schema.md).",
    )
    sub = p.add_subparsers(dest="schema_command", metavar="COMMAND", required=True)
    show = sub.add_parser(
        "show",
        help="the declared schema: columns and Iceberg types, event time, key, partitioning, the record contract",
        description="Read TABLE_SCHEMA (with EVENT_TIME_FIELD, KEY_FIELDS, PARTITION_BY) as every part of lakeflow "
        "reads it. Exit codes: 0, 2 the schema is unusable (the line names the file and the field).",
    )
    show.add_argument("--json", action="store_true", help="print JSON (the record contract included)")
    show.set_defaults(handler=_show)
    plan = sub.add_parser(
        "plan",
        help="each change of the declared schema against the compacted table: apply, convert or refuse, and why",
        description="What the next `lakeflow compact` would do to the table's schema: apply (in the commit that "
        "writes the data), convert (records written as the column's type) or refuse (the run stops). Changes "
        "nothing. Exit codes: 0, 2 a change would be refused or the schema is unusable.",
    )
    add_table_arguments(plan)
    plan.add_argument("--json", action="store_true", help="print JSON")
    plan.set_defaults(handler=_plan)


def _show(args: argparse.Namespace) -> int:
    from lakeflow.schema import declared_schema
    from lakeflow.schema.types import spelled
    from lakeflow.settings import load_settings

    s = declared_schema(load_settings())
    columns = [f"{f.name}: {spelled(f.field_type)}{'' if f.required else ' (optional)'}" for f in s.fields.fields]
    if s.derived_time:
        columns.append(f"{s.event_time_column}: timestamptz (derived from {s.event_time})")
    lines = [
        f"{s.title or 'schema'} from {s.source} ({s.digest})",
        *(f"  {c}" for c in columns),
        f"event time   {s.event_time}" + (f" (epoch milliseconds → {s.event_time_column})" if s.derived_time else ""),
        f"key          {', '.join(s.key) or '(none: every record is kept)'}",
        f"partitioning {', '.join(map(str, s.partition_by)) or '(none)'}",
        f"sort         {', '.join(s.sort_by)}",
    ]
    data = {
        "source": s.source,
        "title": s.title,
        "digest": s.digest,
        "columns": columns,
        "event_time": s.event_time,
        "event_time_column": s.event_time_column,
        "key": list(s.key),
        "partition_by": [str(t) for t in s.partition_by],
        "sort_by": list(s.sort_by),
        "contract": s.contract(),
    }
    Output(args.json).result(lines, data)
    return 0


def _plan(args: argparse.Namespace) -> int:
    from lakeflow.compaction.config import load_config
    from lakeflow.compaction.schema_plan import schema_plan

    planned = schema_plan(load_config(options_of(args)))
    Output(args.json).result(planned.lines(), planned.to_dict())
    return EXIT_ERROR if planned.refused else 0
