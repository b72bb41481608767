"""``lakeflow demo`` (``make demo``): the whole chain, bounded, in one command (:mod:`lakeflow.demo`),
then where everything is."""

from __future__ import annotations

import argparse
import os
import re
import sys

from lakeflow.cli.main import EXIT_INTERRUPTED
from lakeflow.cli.output import shown
from lakeflow.demo import RECORDS, SOURCES, TOPIC, DemoRun


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``lakeflow demo`` to the ``lakeflow`` parser."""
    p = subparsers.add_parser(
        "demo",
        help="the whole chain, bounded, in one command: Flink cluster, flink run, compact, harvest, query",
        description="Start a local standalone Flink cluster (free ports), run the packaged ingestion job on it "
        "with `flink run` (a bounded number of readings into the embedded catalog), compact the "
        "part files into the Iceberg table, harvest the lineage into one HTML page and query the "
        "table; then print where everything is. State in $LAKEFLOW_HOME/demo (emptied first); "
        "no other setting of .env.local or the environment applies. The cluster is "
        "stopped at the end and on Ctrl+C. Needs `make package` (make demo runs it). With --source kafka, "
        "a local Kafka broker (Kafka's jars from Maven Central, checksums verified, cached in build/jars/) and "
        "a producer of the synthetic readings start first; the job reads the topic.",
    )
    p.add_argument("--records", type=int, default=RECORDS, help=f"readings to stream (default {RECORDS:,})")
    p.add_argument(
        "--source",
        choices=SOURCES,
        default="synthetic",
        help="synthetic: the job generates the readings; kafka: a local broker and a producer of the readings "
        f"start first, the job reads their topic {TOPIC!r} (default synthetic)",
    )
    p.set_defaults(handler=_demo)


def _demo(args: argparse.Namespace) -> int:
    from lakeflow.cli.env_example import sections
    from lakeflow.demo import DemoFailed, run
    from lakeflow.settings import load_settings
    from lakeflow.settings.env import variables

    if args.records < 1:
        print("lakeflow demo: --records: expected a positive number", file=sys.stderr)
        return 2
    home = load_settings(local=True).home / "demo"
    lakeflow_variables = {name for model in sections() for name in variables(model)}
    try:
        done = run(home, lakeflow_variables, args.records, args.source)
    except DemoFailed as exc:
        print(f"lakeflow demo: {exc}", file=sys.stderr)
        return 1
    if done is None:
        return EXIT_INTERRUPTED
    report(done)
    return 0


def report(done: DemoRun) -> None:
    """Where the topic, the raw files, the Iceberg table, the lineage store and the page are; the query result."""
    home, ingest_output, query_output, page, seconds = (
        done.home,
        done.ingest_output,
        done.query_output,
        done.page,
        done.seconds,
    )
    raw = next(iter(re.findall(r"^Wrote (.*)$", ingest_output, re.MULTILINE)), "(see logs/2-flink.log)")
    tables = sorted({p.parent.parent for p in (home / "iceberg").glob("**/metadata/*.metadata.json")})
    rel = os.path.relpath(home)
    rel = str(home.resolve()) if rel.startswith("..") else rel
    stopped = "the Flink cluster and the Kafka broker are" if done.topic else "the Flink cluster is"
    print(f"\nDone in {seconds:.0f} s; {stopped} stopped. Everything is under {rel}:")
    if done.topic:
        print(f"  Kafka topic      {done.topic} (the broker's data: {home / 'kafka'})")
    print(f"  raw part files   {raw}")
    print(
        f"  Iceberg table    {', '.join(str(t) for t in tables) or home / 'iceberg'} (embedded catalog "
        f"{home / 'iceberg'})"
    )
    print(f"  lineage store    {home / 'lineage'} (OpenLineage events of the Flink job and of the compaction)")
    print(f"  step logs        {home / 'logs'}")
    print(f"\nlakeflow query (records per value of the key's first field):\n{query_output.rstrip()}")
    print(f"\nLineage page: {page.resolve().as_uri()}  — open it in a browser.")
    query = shown("query", "--local", "'SELECT count(*) FROM readings'")
    print(
        f"Next: LAKEFLOW_HOME={rel} {query}\n      (your own SQL on the demo's table); the chain by hand, step "
        "by step: docs/walkthrough.md, 'The chain step by step'."
    )
