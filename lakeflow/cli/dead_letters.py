"""``lakeflow dead-letters list`` (each stream's dead letters by reason) and ``lakeflow dead-letters
replay`` (a stream's dead letters checked again against its current schema: those that pass land in
the raw table once, the rest stay with their reason now); :mod:`lakeflow.dead_letters` does the work."""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from typing import Any

from lakeflow.cli.main import EXIT_ERROR
from lakeflow.cli.output import Output, shown
from lakeflow.errors import LakeflowError

COLUMNS = ("stream", "letters", "files", "oldest bucket", "newest bucket", "reason")


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``lakeflow dead-letters`` to the ``lakeflow`` parser."""
    p = subparsers.add_parser(
        "dead-letters",
        help="the Kafka messages ingestion took for no record: count them by reason, replay them after a schema fix",
        description="The ingestion job (SOURCE=kafka) writes every message that is no record of its stream's schema, "
        "with the reason, to the raw table's _dead_letters/ (docs/ingestion.md); these commands read them "
        "(docs/pipelines.md, Dead letters).",
    )
    sub = p.add_subparsers(dest="dead_letters_command", metavar="COMMAND", required=True)
    ls = sub.add_parser(
        "list",
        help="each stream's committed dead letters: the count per reason, the files, the oldest and newest bucket",
        description="Read-only. Every stream of the pipeline (a topic pattern's tables: those registered in the "
        "catalog), or the one --stream names. Exit codes: 0, 2 the pipeline is unusable or a stream's dead "
        "letters cannot be read.",
    )
    _common(
        ls, "the stream whose dead letters to count (default: every stream; lakeflow pipeline show lists them)", False
    )
    ls.set_defaults(handler=_list)
    rp = sub.add_parser(
        "replay",
        help="check a stream's dead letters against its current schema: those that pass land in the raw table "
        "once, the rest stay with their new reason",
        description="Once the stream's schema file is fixed: each dead letter's message is checked as the "
        "ingestion job checks one (a JSON object, no duplicate key, at most KAFKA_MAX_MESSAGE_BYTES, the record "
        "contract); the records that pass are written, whole and compactly as the job writes them, as one part "
        "file per dead-letter file in the raw table's current hour bucket (the next lakeflow compact takes them), "
        "and the dead-letter file is rewritten with the letters that stay, each with the reason it fails for "
        "now. Exactly once across crashes and reruns: an interrupted replay is finished by the next. Exit codes: "
        "0 (also with nothing to replay), 2 the stream or the pipeline is unusable, or a file cannot be read.",
    )
    _common(
        rp,
        "the stream whose dead letters to replay: a stream's name, or one table of a topic-pattern stream (lakeflow "
        "pipeline show lists them)",
        True,
    )
    rp.add_argument("--dry-run", action="store_true", help="tell what would be replayed and kept; write nothing")
    rp.set_defaults(handler=_replay)


def _common(parser: argparse.ArgumentParser, stream_help: str, required: bool) -> None:
    parser.add_argument("--stream", metavar="NAME", required=required, help=stream_help)
    parser.add_argument("--local", action="store_true", help="use the embedded local catalog")
    parser.add_argument("--json", action="store_true", help="print JSON")


def _list(args: argparse.Namespace) -> int:
    from lakeflow.compaction.streams import pipeline_streams
    from lakeflow.dead_letters import tally
    from lakeflow.settings import load_settings
    from lakeflow.streams import load_pipeline

    settings = load_settings(local=True if args.local else None)
    pipeline = load_pipeline(settings)
    streams = pipeline_streams(settings, pipeline)
    if args.stream is not None:
        streams = (pipeline.find(args.stream, streams),)
    rows: list[dict[str, Any]] = []
    for stream in streams:  # a stream that cannot be read is its row's error; the others are shown
        try:
            rows.append(tally(settings, stream).to_dict())
        except LakeflowError as exc:
            rows.append({"stream": stream.name, "raw_table": stream.raw_name, "error": str(exc)})
    Output(args.json).result(list_lines(rows), {"source": pipeline.source, "streams": rows})
    failed = any("error" in r or r.get("unreadable") for r in rows)
    return EXIT_ERROR if failed else 0


def list_lines(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The streams' tallies (``Tally.to_dict()``, or ``{"stream", "error"}``) as one aligned table: a
    line per stream, then one per reason; none at all is one line."""
    if rows and all("error" not in r and not r["letters"] and not r["unreadable"] for r in rows):
        return [f"no dead letters ({', '.join(r['stream'] for r in rows)})"]
    if not rows:
        return ["no dead letters (no stream)"]
    cells: list[tuple[str, ...]] = [COLUMNS]
    notes: list[str] = []
    for r in rows:
        if "error" in r:
            cells.append((r["stream"], "-", "-", "-", "-", f"error: {r['error']}"))
            continue
        if not r["registered"]:
            cells.append((r["stream"], "0", "0", "-", "-", f"(raw table {r['raw_table']} not registered yet)"))
            continue
        total = "(every reason)" if r["letters"] else "(none)"
        oldest, newest = r["oldest_bucket"] or "-", r["newest_bucket"] or "-"
        cells.append((r["stream"], str(r["letters"]), str(r["files"]), oldest, newest, total))
        cells += [("", str(n), "", "", "", reason) for reason, n in r["reasons"].items()]
        notes += [f"{r['stream']}: unreadable: {u}" for u in r["unreadable"]]
        if r["pending_replays"]:
            notes.append(
                f"{r['stream']}: {r['pending_replays']} interrupted replay(s): "
                f"{shown('dead-letters', 'replay', '--stream', r['stream'])} finishes them"
            )
    widths = [max(len(row[i]) for row in cells) for i in range(len(COLUMNS) - 1)]
    lines = []
    for row in cells:
        padded = [c.rjust(w) if i in (1, 2) else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths, strict=False))]
        lines.append("  ".join([*padded, row[-1]]).rstrip())
    return lines + notes


def _replay(args: argparse.Namespace) -> int:
    from lakeflow.compaction.streams import chosen_stream
    from lakeflow.dead_letters import replay
    from lakeflow.settings import load_settings

    settings = load_settings(local=True if args.local else None)
    report = replay(settings, chosen_stream(settings, args.stream), dry_run=args.dry_run)
    data = report.to_dict()
    Output(args.json).result(replay_lines(data), data)
    return EXIT_ERROR if report.unreadable else 0


def replay_lines(r: Mapping[str, Any]) -> list[str]:
    """A replay's report (``ReplayReport.to_dict()``) for people."""
    head = f"stream {r['stream']} (raw table {r['raw_table']})"
    if not r["registered"]:
        return [f"{head}: no dead letters: the raw table is not registered yet"]
    if not (r["files"] or r["interrupted_replays_finished"] or r["busy"] or r["unreadable"]):
        return [f"{head}: no dead letters in {r['location']}/_dead_letters"]
    dry = r["dry_run"]
    lines = [f"{head}, against {r['schema']}{' (dry run: nothing written)' if dry else ''}:"]
    if r["interrupted_replays_finished"]:
        finished = len(r["interrupted_replays_finished"])
        lines.append(f"  {'would finish' if dry else 'finished'} {finished} interrupted replay(s) first")
    verb = "would replay" if dry else "replayed"
    lines.append(f"  {verb} {r['replayed']} letter(s) as records" + (":" if r["replayed"] else ""))
    lines += [f"    {n:>6}  (was: {reason})" for reason, n in r["replayed_by_reason"].items()]
    lines += [f"    → {r['location']}/{part}" for part in r["parts_written"]]
    changed = f", {r['reasons_changed']} with a new reason" if r["reasons_changed"] else ""
    kept = f"  {'would keep' if dry else 'kept'} {r['kept']} dead letter(s){changed}"
    lines.append(kept + (":" if r["kept"] else ""))
    lines += [f"    {n:>6}  {reason}" for reason, n in r["kept_by_reason"].items()]
    lines += [f"  busy (another replay is at it): {rel}" for rel in r["busy"]]
    lines += [f"  unreadable: {u}" for u in r["unreadable"]]
    if r["parts_written"] and not dry:
        lines.append(f"Next: {shown('compact', '--stream', r['stream'])}   (compacts the replayed records)")
    return lines
