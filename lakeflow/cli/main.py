"""``lakeflow`` — the root parser, the dispatch, and the one mapping of errors to exit codes.

Each command group adds its subcommands from its own module of :mod:`lakeflow.cli`
(``register(subparsers)``, found by name in :data:`COMMAND_MODULES`); heavy imports happen inside
the handlers, and no parser reads a setting, so ``lakeflow --help`` starts fast and a bad variable
fails only the command that reads it.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Callable, Sequence

from lakeflow import __version__
from lakeflow.errors import LakeflowError

COMMAND_MODULES = (
    "lakeflow.cli.catalog",
    "lakeflow.cli.flink",
    "lakeflow.cli.spark",
    "lakeflow.cli.compact",
    "lakeflow.cli.maintain",
    "lakeflow.cli.query",
    "lakeflow.cli.schema",
    "lakeflow.cli.pipeline",
    "lakeflow.cli.dead_letters",
    "lakeflow.cli.lineage",
    "lakeflow.cli.stack",
    "lakeflow.cli.aws_profile",
    "lakeflow.cli.demo",
    "lakeflow.cli.tools",
)
# Libraries whose DEBUG log is the wire: py4j every JVM command (Spark conf values, fs.s3a keys and
# session tokens included), botocore signed requests, urllib3 request lines. Never below INFO.
WIRE_LOGGERS = ("py4j", "botocore", "s3transfer", "urllib3")
EXIT_ERROR, EXIT_BUSY, EXIT_INTERRUPTED = 2, 3, 130


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lakeflow",
        description="Stream IoT sensor data with Flink into Lakekeeper, compact it into Iceberg "
        "(pyarrow, or Spark for large batches), and harvest the lineage of both.",
    )
    parser.add_argument("--version", action="version", version=f"lakeflow {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def run_command(name: str, action: Callable[[], int | None]) -> int:
    """Run ``action``, returning its exit code; a failure lakeflow knows becomes one line on stderr,
    ``name: message``, and its exit code (``LakeflowError.exit_code``): 3 when another compaction
    holds the table's lease, 2 for bad settings, an unreachable or refusing service, a broken ledger,
    a lost lease or commit, or a library the command needs missing from this environment (the line
    names the environment that has it). The one place errors become exit codes."""
    try:
        return int(action() or 0)
    except ModuleNotFoundError as exc:
        missing = (exc.name or "").partition(".")[0]
        if not missing or missing == "lakeflow":
            raise
        print(f"{name}: {_elsewhere(name, missing)}", file=sys.stderr)
        return EXIT_ERROR
    except Exception as exc:
        code = _exit_code(exc)
        if code is None:
            raise
        print(f"{name}: {'refused: ' if code == EXIT_BUSY else ''}{exc}", file=sys.stderr)
        return code


def _elsewhere(name: str, module: str) -> str:
    """Where to run command ``name`` that needs ``module``, which this environment lacks."""
    from lakeflow.runtime.homes import environment_with

    lacks = f"needs {module}, which this environment ({sys.prefix}) does not have"
    script = environment_with(module)
    if script is not None:
        return f"{lacks}: run it with the environment that has it: {script} {name.partition(' ')[2]}".rstrip()
    return f"{lacks}: install lakeflow with the extra that provides it (docs/environments.md)"


def _exit_code(exc: Exception) -> int | None:
    """The exit code of a failure lakeflow knows (None: an unexpected one, shown with its traceback)."""
    return exc.exit_code if isinstance(exc, LakeflowError) else None


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
        return run_command(f"lakeflow {args.command}", lambda: args.handler(args))
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
