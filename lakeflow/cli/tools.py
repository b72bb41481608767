"""Internal commands the Makefile and lakeflow itself run, left out of ``lakeflow --help`` and
docs/cli.md: ``lakeflow jars`` (the jar sets from Maven Central), ``lakeflow spark-cds`` (the Spark
driver's class archive), ``lakeflow flink-cds`` (the local Flink job's), ``lakeflow flink-command`` (the ``flink run`` line ``make package`` prints)."""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the internal commands (no ``help=``: argparse lists them nowhere)."""
    from lakeflow.runtime.jars import DEFAULT_SETS, SETS

    p = subparsers.add_parser(
        "jars", description="Fetch the jar sets lakeflow needs from Maven Central into build/jars/."
    )
    p.add_argument(
        "sets",
        nargs="*",
        choices=tuple(SETS),
        metavar="SET",
        help="flink (the S3 plugin, installed into Flink's plugins/), spark (hadoop-aws + AWS SDK "
        "v2), sql-gateway (Flink's SQL Gateway jar), kafka-connector, jdbc-connector (Flink's Kafka "
        f"and PostgreSQL JDBC connectors); default {', '.join(DEFAULT_SETS)}",
    )
    p.add_argument("--print-versions", action="store_true", help="print the versions and folders, fetch nothing")
    p.set_defaults(handler=_jars)

    p = subparsers.add_parser("spark-cds", description="Build the Spark driver JVM's class-data-sharing archive.")
    p.add_argument("--force", action="store_true", help="rebuild it when it is there")
    p.add_argument("--warm-up", action="store_true", help=argparse.SUPPRESS)  # the archiving JVM's own run
    p.set_defaults(handler=_spark_cds)

    p = subparsers.add_parser(
        "flink-cds", description="Build the local Flink job's (make run's) JVM class-data-sharing archive."
    )
    p.add_argument("--force", action="store_true", help="rebuild it when it is there")
    p.set_defaults(handler=_flink_cds)

    p = subparsers.add_parser(
        "flink-command", description="Print the `flink run` command of the packaged job (make package)."
    )
    p.set_defaults(handler=_flink_command)


def _jars(args: argparse.Namespace) -> int:
    from lakeflow.runtime.jars import DEFAULT_SETS, SETS, JarsUnavailable, ensure_jars

    wanted = [name for name in SETS if name in (args.sets or DEFAULT_SETS)]
    try:
        if args.print_versions:
            for s in (SETS[name]() for name in wanted):
                print(f"{s.name}\t{s.version}\t{s.folder}\t{'ready' if s.ready() else 'missing'}")
            return 0
        for name, jars in ensure_jars(wanted).items():
            where = jars[0] if len(jars) == 1 else f"{len(jars)} jars in {jars[0].parent}"
            print(f"{name}: {where}")
    except JarsUnavailable as exc:
        print(f"lakeflow jars: {exc}", file=sys.stderr)
        return 2
    return 0


def _spark_cds(args: argparse.Namespace) -> int:
    """``--warm-up``: the archiving JVM's job; ``--force``: rebuild; else build unless there."""
    from lakeflow.compaction.spark.cds import build, warm_up
    from lakeflow.runtime.class_archive import archive_path

    if args.warm_up:
        warm_up()
        return 0
    return _class_archive("spark-cds", "Spark driver class archive", archive_path(), build, args.force)


def _flink_cds(args: argparse.Namespace) -> int:
    """Build the archive unless it is there (``--force``: rebuild); run with the ingestion environment's Python."""
    from lakeflow.ingest.client_jvm import build_archive
    from lakeflow.runtime.class_archive import flink_archive_path

    return _class_archive("flink-cds", "Flink job class archive", flink_archive_path(), build_archive, args.force)


def _class_archive(command: str, what: str, path: Path | None, build: Callable[[], Path], force: bool) -> int:
    """Build the archive ``path`` with ``build`` unless it is there (``force``: rebuild); what happened, one line."""
    if path is not None and path.exists() and not force:
        print(f"{what}: {path} (there; --force rebuilds it)")
        return 0
    try:
        path = build()
    except (RuntimeError, subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        detail = getattr(exc, "stderr", b"") or b""
        print(f"lakeflow {command}: {exc}\n{detail.decode(errors='replace')[-2000:]}", file=sys.stderr)
        return 1
    print(f"{what}: {path} ({path.stat().st_size >> 20} MiB)")
    return 0


def _flink_command(args: argparse.Namespace) -> int:
    from lakeflow.ingest.helpers_jar import JAR_NAME
    from lakeflow.ingest.submit import ENV_ARCHIVE, REPO, printed
    from lakeflow.settings import load_settings

    if not ENV_ARCHIVE.is_file():
        print(f"lakeflow flink-command: {ENV_ARCHIVE} is not built yet (make package)", file=sys.stderr)
    print(printed(load_settings(local=True).home, REPO / "build" / JAR_NAME))
    return 0
