"""``lakeflow`` — the root parser, the dispatch, and the one mapping of errors to exit codes.

Each command group adds its subcommands from its own module of :mod:`lakeflow.cli`
(``register(subparsers)``, found by name in :data:`COMMAND_MODULES`); heavy imports happen inside
the handlers, and no parser reads a setting, so ``lakeflow --help`` starts fast and a bad variable
fails only the command that reads it. A command named on the command line imports its own module
alone (what a module imports is every command's start-up otherwise).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Callable, Iterable, Sequence

from lakeflow import __version__
from lakeflow.errors import LakeflowError
from lakeflow.runtime.memory import keep_loaded_modules, modules_loading, no_collection_at_exit

# module → the commands it registers (tests/unit/test_cli.py keeps them exact)
COMMAND_MODULES = {
    "lakeflow.cli.catalog": ("register", "vend", "doctor", "credential-process"),
    "lakeflow.cli.flink": ("flink",),
    "lakeflow.cli.spark": ("spark",),
    "lakeflow.cli.compact": ("compact",),
    "lakeflow.cli.maintain": ("maintain", "status"),
    "lakeflow.cli.query": ("query",),
    "lakeflow.cli.schema": ("schema",),
    "lakeflow.cli.pipeline": ("pipeline",),
    "lakeflow.cli.dead_letters": ("dead-letters",),
    "lakeflow.cli.lineage": ("harvest", "lineage"),
    "lakeflow.cli.stack": ("stack",),
    "lakeflow.cli.aws_profile": ("aws-profile",),
    "lakeflow.cli.demo": ("demo",),
    "lakeflow.cli.tools": ("jars", "spark-cds", "flink-cds", "flink-command"),
}
# Libraries whose DEBUG log is the wire: py4j every JVM command (Spark conf values, fs.s3a keys and
# session tokens included), botocore signed requests, urllib3 request lines. Never below INFO.
WIRE_LOGGERS = ("py4j", "botocore", "s3transfer", "urllib3")
EXIT_ERROR, EXIT_BUSY, EXIT_INTERRUPTED = 2, 3, 130


def build_parser() -> argparse.ArgumentParser:
    """The whole ``lakeflow`` parser: every command group's module imported."""
    return _parser(COMMAND_MODULES)


def _parser(modules: Iterable[str]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lakeflow",
        description="Stream IoT sensor data with Flink into Lakekeeper, compact it into Iceberg "
        "(pyarrow, or Spark for large batches), and harvest the lineage of both.",
    )
    parser.add_argument("--version", action="version", version=f"lakeflow {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    with modules_loading():
        for name in modules:
            importlib.import_module(name).register(sub)
    return parser


def _command_parser(argv: Sequence[str]) -> argparse.ArgumentParser:
    """The parser of the command ``argv`` names (the root takes no option with a value), only its
    module imported; the whole parser when it names none (``--help``, a typo)."""
    command = next((arg for arg in argv if not arg.startswith("-")), None)
    module = next((m for m, commands in COMMAND_MODULES.items() if command in commands), None)
    return build_parser() if module is None else _parser((module,))


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
    if argv is None:  # the process's own command line: the process ends after it
        keep_loaded_modules()
    args = _command_parser(sys.argv[1:] if argv is None else argv).parse_args(argv)
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
    finally:
        if argv is None:  # the process's own command line: the process ends next
            no_collection_at_exit()


if __name__ == "__main__":
    sys.exit(main())
