"""``lakeflow pipeline show``: each stream of the pipeline (PIPELINE, or the settings' one stream), its
source, its raw and Iceberg tables, its declared schema and the plan of its schema change."""

from __future__ import annotations

import argparse
from dataclasses import replace
from typing import Any

from lakeflow.cli.compact import add_table_arguments, options_of
from lakeflow.cli.main import EXIT_ERROR
from lakeflow.cli.output import Output
from lakeflow.errors import LakeflowError


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``lakeflow pipeline`` to the ``lakeflow`` parser."""
    p = subparsers.add_parser(
        "pipeline",
        help="the streams of the pipeline (PIPELINE, a TOML file; else the settings' one stream)",
        description="A pipeline declares streams: each a Kafka source (topics, or a topic pattern whose captures "
        "name the table), a schema file and its tables (docs/pipelines.md).",
    )
    sub = p.add_subparsers(dest="pipeline_command", metavar="COMMAND", required=True)
    show = sub.add_parser(
        "show",
        help="each stream: its topics, raw and Iceberg tables, schema, and schema plan (apply / convert / refuse)",
        description="Read the pipeline as every part of lakeflow reads it; a topic pattern's tables are those "
        "registered in the catalog. Exit codes: 0, 2 the pipeline is unusable or a stream's schema change would "
        "be refused.",
    )
    add_table_arguments(show)
    show.add_argument("--json", action="store_true", help="print JSON")
    show.set_defaults(handler=_show)


def _show(args: argparse.Namespace) -> int:
    from lakeflow.compaction.config import load_config
    from lakeflow.compaction.schema_plan import schema_plan
    from lakeflow.compaction.streams import pipeline_streams
    from lakeflow.settings import load_settings
    from lakeflow.streams import load_pipeline

    options = options_of(args)
    settings = load_settings(local=True if options.local else None)
    pipeline = load_pipeline(settings)
    streams = pipeline_streams(settings, pipeline)
    if options.stream is not None:
        streams = (pipeline.find(options.stream, streams),)
    lines = [f"pipeline from {pipeline.source}: {len(pipeline.declared)} declared stream(s), {len(streams)} table(s)"]
    data: dict[str, Any] = {"source": pipeline.source, "streams": []}
    refused = False
    for d in pipeline.patterns:
        lines.append(f"stream {d.name}: topic pattern {d.pattern!r} → table {'.'.join((*d.namespace, d.table))}")
    for s in streams:
        entry: dict[str, Any] = {
            "stream": s.name,
            "declared": s.declared,
            "topics": list(s.topics),
            "raw_table": s.raw_name,
            "iceberg_table": s.iceberg_name,
            "schema": {"source": s.schema.source, "digest": s.schema.digest, "key": list(s.schema.key)},
        }
        via = f" (of {s.declared})" if s.declared != s.name else ""
        lines.append(f"stream {s.name}{via}: topics {', '.join(s.topics) or '(synthetic, or found by the pattern)'}")
        lines.append(f"  raw table {s.raw_name} → Iceberg table {s.iceberg_name}")
        lines.append(
            f"  schema {s.schema.source} ({s.schema.digest}); key {', '.join(s.schema.key) or '(none)'}; "
            f"event time {s.schema.event_time}"
        )
        try:
            planned = schema_plan(load_config(replace(options, stream=s.name)))
        except LakeflowError as exc:
            entry["plan"] = {"error": str(exc)}
            lines.append(f"  schema plan: cannot tell: {exc}")
        else:
            refused = refused or planned.refused
            entry["plan"] = planned.to_dict()
            lines += [f"  {line}" for line in planned.lines()]
        data["streams"].append(entry)
    Output(args.json).result(lines, data)
    return EXIT_ERROR if refused else 0
