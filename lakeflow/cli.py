"""``lakeflow`` — the command line. Thin: parse arguments, call the packages, print.

Each area adds its subcommands from its own ``commands`` module (``register(subparsers)``);
heavy imports happen inside the handlers, so ``lakeflow --help`` and ``harvest`` start fast.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from lakeflow import __version__
from lakeflow.errors import LakeflowError

COMMAND_MODULES = (
    "lakeflow.catalog.commands",
    "lakeflow.ingest.commands",
    "lakeflow.spark_cluster",
    "lakeflow.compaction.commands",
    "lakeflow.compaction.maintain",
    "lakeflow.compaction.status",
    "lakeflow.query",
    "lakeflow.lineage.commands",
    "lakeflow.stack",
    "lakeflow.aws_profile",
    "lakeflow.demo",
)
# Libraries whose DEBUG log is the wire: py4j every JVM command (Spark conf values, fs.s3a keys and
# session tokens included), botocore signed requests, urllib3 request lines. Never below INFO.
WIRE_LOGGERS = ("py4j", "botocore", "s3transfer", "urllib3")


def shown(*args: str) -> str:
    """A ``lakeflow`` command line as a user can paste it from here: ``.venv/bin/lakeflow …`` (the
    script beside this interpreter, relative to the current directory when below it)."""
    script = Path(sys.executable).parent / "lakeflow"
    rel = os.path.relpath(script)
    return " ".join([str(script) if rel.startswith("..") else rel, *args])


def failed(command: str, exc: LakeflowError) -> int:
    """The one place an error becomes what the user sees: ``lakeflow COMMAND: message`` on stderr
    and the error's exit code."""
    print(f"lakeflow {command}: {exc}", file=sys.stderr)
    return exc.exit_code


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lakeflow",
        description="Stream IoT sensor data with Flink into Lakekeeper, compact it into Iceberg "
        "(pyarrow, or Apache Spark for large batches), and harvest the lineage of both.",
    )
    parser.add_argument("--version", action="version", version=f"lakeflow {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``lakeflow`` script; returns the exit code."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    for name in WIRE_LOGGERS:
        logging.getLogger(name).setLevel(logging.INFO)
    try:
        return int(args.handler(args) or 0)
    except LakeflowError as exc:
        return failed(args.command, exc)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
