"""``lakeflow compact``: the compaction job's flags (``jobs/compact.py`` parses its own with them too)
and the command, which calls the job's pipeline (``compact()`` of jobs/compact.py) in this process.

The job starts Spark only when its engine is ``spark`` (:mod:`lakeflow.compaction.engine`): here
through PySpark's own launcher, given ``--master``/``--spark-conf``/``--jars`` as spark-submit
options; on a cluster through ``spark-submit --archives build/compaction-env.tar.gz#env jobs/compact.py``
(``--print-command``). Small batches (the ``arrow`` engine) start no JVM at all. Only non-secret flags
go on either command line; the job reads settings and credentials from the environment and
``.env.local`` inside the driver.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import logging
import shlex
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from lakeflow.cli.main import EXIT_ERROR, run_command
from lakeflow.cli.output import shown
from lakeflow.compaction.config import (
    ENGINES,
    ENV_ARROW_MAX_MB,
    ENV_ENGINE,
    ENV_SMALL_FILE_MB,
    ENV_TABLE,
    CompactConfig,
    CompactEnv,
    CompactOptions,
    MetricsExport,
    OnCommit,
    ServiceOptions,
    load_config,
    metrics_export,
    schedule,
)
from lakeflow.runtime.memory import modules_loading

if TYPE_CHECKING:
    from lakeflow.compaction.continuous import Served
    from lakeflow.compaction.metrics import CompactorMetrics

Pipeline = Callable[[CompactConfig], int]


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``lakeflow compact`` to the ``lakeflow`` parser."""
    p = subparsers.add_parser(
        "compact",
        help="compact the raw table's JSON part files into an Iceberg table (PySpark job)",
        description="Run jobs/compact.py: new committed part files of NAMESPACE.TABLE → Parquet → one "
        "atomic Iceberg commit (with the ledger of consumed files). Spark (--master, "
        "--spark-conf, --jars) starts only for the spark engine. "
        "Exit codes: 0 done, 2 error, 3 another run (on any host) holds the table's lease.",
    )
    add_job_arguments(p)
    p.add_argument(
        "--master",
        help="Spark master (default local[2]; with --print-command the cluster of "
        "make spark-up, spark://127.0.0.1:$SPARK_MASTER_PORT)",
    )
    p.add_argument(
        "--spark-conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra Spark configuration (repeatable; never credentials)",
    )
    p.add_argument("--jars", default="", help="comma-separated extra jars (e.g. hadoop-aws for s3a://)")
    p.add_argument(
        "--print-command",
        action="store_true",
        help="print the spark-submit command for a cluster (the job's environment as --archives "
        "build/compaction-env.tar.gz of make package) and exit",
    )
    p.add_argument(
        "--every",
        metavar="DURATION",
        help="continuous mode: run every DURATION (60s, 5m …) until SIGTERM / Ctrl+C, which lets the "
        "run in progress finish; one line per run",
    )
    p.add_argument("--maintain-every", metavar="DURATION", help=CompactEnv.help("maintain_every_s"))
    p.add_argument("--metrics-port", type=int, metavar="PORT", help=CompactEnv.help("metrics_port"))
    p.add_argument("--metrics-textfile", metavar="PATH", help=CompactEnv.help("metrics_textfile"))
    p.add_argument("--pushgateway", metavar="URL", help=CompactEnv.help("pushgateway_url"))
    p.set_defaults(handler=_compact)


def add_job_arguments(parser: argparse.ArgumentParser) -> None:
    """The job's flags (shared by ``jobs/compact.py`` and ``lakeflow compact``)."""
    add_table_arguments(parser)
    parser.add_argument(
        "--engine",
        choices=ENGINES,
        help=f"who parses and writes: spark, arrow (pyarrow in the driver), or auto — arrow "
        f"for batches that fit in memory (or up to ${ENV_ARROW_MAX_MB} MiB) "
        f"(${ENV_ENGINE}; default auto)",
    )
    parser.add_argument(
        "--delete-source",
        action="store_true",
        help="delete the compacted raw files after a successful commit, once they are older than --delete-min-age",
    )
    parser.add_argument("--delete-min-age", metavar="DURATION", help=CompactEnv.help("delete_min_age_s"))
    parser.add_argument("--raw-retention", metavar="DURATION", help=CompactEnv.help("raw_retention_s"))
    parser.add_argument("--look-back", metavar="DURATION", help=CompactEnv.help("look_back_s"))
    parser.add_argument(
        "--full-scan",
        action="store_true",
        help="list every bucket of the raw table, not only the look-back window: catches "
        "files committed later than the look-back (cost grows with the raw table)",
    )
    parser.add_argument("--report", type=Path, metavar="PATH", help="write the run summary as JSON to PATH")
    parser.add_argument(
        "--maintain", action="store_true", help="after a successful run, maintain the table as `lakeflow maintain` does"
    )
    add_maintain_arguments(parser)


def add_table_arguments(parser: argparse.ArgumentParser) -> None:
    """Which table, and its file size (``lakeflow compact``, ``maintain`` and ``status``)."""
    parser.add_argument(
        "--stream",
        metavar="NAME",
        help="the stream of the pipeline (PIPELINE) whose tables to use: a stream's name, or one table of a "
        "topic-pattern stream (default: every stream; lakeflow pipeline show lists them)",
    )
    parser.add_argument(
        "--target-table",
        metavar="NAME",
        help=f"Iceberg table name in NAMESPACE (${ENV_TABLE}; default: TABLE-compacted)",
    )
    parser.add_argument("--target-file-mb", type=int, metavar="MB", help=CompactEnv.help("target_file_mb"))
    parser.add_argument("--local", action="store_true", help="use the embedded local catalogs")


def add_maintain_arguments(parser: argparse.ArgumentParser) -> None:
    """``lakeflow maintain``'s own flags (``lakeflow compact --maintain`` takes them too)."""
    parser.add_argument(
        "--small-file-mb",
        type=int,
        metavar="MB",
        help=f"maintain: merge a partition's files under this size (${ENV_SMALL_FILE_MB}; "
        "default 3/4 of the target file size)",
    )
    parser.add_argument("--expire-older-than", metavar="DURATION", help=CompactEnv.help("expire_older_than_s"))
    parser.add_argument("--keep-last", type=int, metavar="N", help=CompactEnv.help("keep_last"))
    parser.add_argument("--orphan-min-age", metavar="DURATION", help=CompactEnv.help("orphan_min_age_s"))
    parser.add_argument("--leftover-min-age", metavar="DURATION", help=CompactEnv.help("leftover_min_age_s"))


def options_of(args: argparse.Namespace) -> CompactOptions:
    """The :class:`CompactOptions` among ``args`` (those of the parsers above it was given)."""
    given = vars(args)
    return CompactOptions(**{name: given[name] for name in CompactOptions.__dataclass_fields__ if name in given})


def job_options(argv: Sequence[str]) -> CompactOptions:
    """``jobs/compact.py``'s command line as options."""
    parser = argparse.ArgumentParser(prog="compact", description="Compact raw JSON part files into Iceberg.")
    add_job_arguments(parser)
    return options_of(parser.parse_args(argv))


def job_argv(options: CompactOptions) -> list[str]:
    """``options`` back as ``jobs/compact.py``'s command line (for spark-submit)."""
    argv = ["--stream", options.stream] if options.stream else []
    argv += ["--target-table", options.target_table] if options.target_table else []
    if options.target_file_mb is not None:
        argv += ["--target-file-mb", str(options.target_file_mb)]
    argv += ["--local"] if options.local else []
    if options.engine:
        argv += ["--engine", options.engine]
    for flag in ("delete_min_age", "raw_retention", "look_back"):
        if getattr(options, flag):
            argv += ["--" + flag.replace("_", "-"), getattr(options, flag)]
    for flag in ("delete_source", "full_scan", "maintain"):
        if getattr(options, flag):
            argv.append("--" + flag.replace("_", "-"))
    if options.report:
        argv += ["--report", str(options.report.resolve())]
    for flag in ("small_file_mb", "expire_older_than", "keep_last", "orphan_min_age", "leftover_min_age"):
        if getattr(options, flag) is not None:
            argv += ["--" + flag.replace("_", "-"), str(getattr(options, flag))]
    return argv


def next_steps() -> list[str]:
    """The natural next commands after a compaction: look at the data, then at its lineage."""
    return [
        f"Next: {shown('query')}   (SQL over the Iceberg table; default: readings per sensor)",
        f"      {shown('lineage', 'view', '--output', 'lineage.html')}   (the lineage page; "
        "make harvest ARGS='--format html --output lineage.html' with the Flink job's too)",
    ]


def run_job(pipeline: Pipeline, argv: Sequence[str]) -> int:
    """``jobs/compact.py``'s main: its command line → a run of ``pipeline`` for each stream (the one
    ``--stream`` names, else every stream of the pipeline, in one Spark application); known failures one
    line each, the others' runs go on; the highest exit code."""
    from lakeflow.compaction.engine import end_pass

    options = job_options(argv)
    names: list[str | None] = []
    code = run_command("compact", lambda: names.extend(s.name for s in served_streams(options)()))
    try:
        for n, name in enumerate(names, 1):
            run = functools.partial(_run_stream, pipeline, options, name, n == len(names))
            code = max(code, run_command("compact", run))
    finally:
        end_pass()
    if code == 0:
        print("\n".join(next_steps()), flush=True)
    return code


def _run_stream(pipeline: Pipeline, options: CompactOptions, stream: str | None, last_of_pass: bool) -> int:
    return pipeline(replace(load_config(replace(options, stream=stream)), last_of_pass=last_of_pass))


@cache
def compaction_pipeline() -> Pipeline:
    """``compact()`` of jobs/compact.py, the pipeline spark-submit runs (imported once)."""
    from lakeflow.compaction.launch import JOB

    spec = importlib.util.spec_from_file_location("lakeflow_compact_job", JOB)
    if spec is None or spec.loader is None or not JOB.is_file():
        raise FileNotFoundError(f"{JOB} not found: run from a lakeflow checkout (pip install -e .)")
    module = importlib.util.module_from_spec(spec)
    with modules_loading():  # (its imports: pyiceberg's catalog, OpenLineage's client…)
        spec.loader.exec_module(module)
    return module.compact


def run_once(
    options: CompactOptions,
    spark_options: Sequence[str],
    on_commit: OnCommit | None = None,
    last_of_pass: bool = False,
) -> int:
    """One run of the job in this process (a Spark it needs launched with ``spark_options``; ``on_commit``
    told its report at the commit; ``last_of_pass``: its Spark session stops once its engine is done)."""
    pipeline = compaction_pipeline()
    return run_command(
        "lakeflow compact",
        lambda: pipeline(
            replace(
                load_config(options),
                spark_options=tuple(spark_options),
                on_commit=on_commit,
                last_of_pass=last_of_pass,
            )
        ),
    )


def _compact(args: argparse.Namespace) -> int:
    from lakeflow.compaction.launch import ENV_ARCHIVE, JOB, cluster_options, spark_options, submit_command

    if not JOB.is_file():
        print(f"lakeflow compact: {JOB} not found: run from a lakeflow checkout (pip install -e .)", file=sys.stderr)
        return EXIT_ERROR
    service = ServiceOptions(
        every=args.every,
        maintain_every=args.maintain_every,
        print_command=args.print_command,
        maintain=args.maintain,
        metrics_port=args.metrics_port,
        metrics_textfile=args.metrics_textfile,
        pushgateway=args.pushgateway,
    )
    every = schedule(service)
    options = options_of(args)
    if args.print_command:
        from lakeflow.cli.spark import default_master

        launch = cluster_options(spark_options(args.master or default_master(), args.spark_conf, args.jars))
        if not ENV_ARCHIVE.is_file():
            print(f"lakeflow compact: {ENV_ARCHIVE} is not built yet: make package", file=sys.stderr)
        print(shlex.join(submit_command(job_argv(options), launch)))
        return 0
    launch = spark_options(args.master, args.spark_conf, args.jars)
    export = metrics_export(service)
    streams = served_streams(options)
    report = args.report.resolve() if args.report else None
    if every is not None:
        from lakeflow.compaction.continuous import run_forever
        from lakeflow.compaction.metrics import MetricsPortUnavailable

        if not getattr(args, "verbose", False):  # one line per run; the stages' progress with lakeflow -v
            logging.getLogger().setLevel(logging.WARNING)

        def tick(stream: str | None, report: Path, maintain: bool, on_commit: OnCommit) -> int:
            chosen = replace(options, stream=stream, report=report, maintain=options.maintain or maintain)
            return run_once(chosen, launch, on_commit)

        try:
            return run_forever(every, tick, streams, report, export.port)
        except MetricsPortUnavailable as exc:
            print(f"lakeflow compact: {exc}", file=sys.stderr)
            return EXIT_ERROR
    code = run_pass(streams(), options, launch, report, export)
    if code == 0:
        print("\n".join(next_steps()), flush=True)
    return code


def served_streams(options: CompactOptions) -> Callable[[], list[Served]]:
    """The streams a run or the service compacts, each with its Iceberg table and own period (None:
    the service's): the one ``--stream`` names, or without a pipeline file the settings' stream (None),
    its table resolved here; else every stream of the pipeline whose raw table exists, listed afresh
    on each call."""
    from lakeflow.compaction.continuous import Served

    if options.stream is None:
        from lakeflow.compaction.streams import pipeline_streams
        from lakeflow.settings import load_settings
        from lakeflow.streams import load_pipeline

        settings = load_settings(local=True if options.local else None)
        if settings.pipeline is not None:
            pipeline = load_pipeline(settings)
            return lambda: [
                Served(s.name, s.iceberg_name, s.compact_every_s) for s in pipeline_streams(settings, pipeline)
            ]
    one = [Served(options.stream, load_config(options).target_name)]
    return lambda: one


def run_pass(
    streams: Sequence[Served],
    options: CompactOptions,
    launch: Sequence[str],
    report: Path | None,
    export: MetricsExport,
) -> int:
    """A single run of each of ``streams``, one after the other; the highest exit code. With a textfile or
    a Pushgateway, every run's figures go into one registry, exported once at the end
    (:func:`lakeflow.compaction.metrics.export_once`)."""
    from lakeflow.compaction.engine import end_pass
    from lakeflow.compaction.launch import JOB

    metrics = None
    if export.textfile is not None or export.pushgateway is not None:
        from lakeflow.compaction.metrics import CompactorMetrics

        metrics = CompactorMetrics()
    codes = []
    try:
        for n, (stream, table, _) in enumerate(streams, 1):
            chosen, last = replace(options, stream=stream), n == len(streams)
            print(
                f"$ {shlex.join([str(JOB), *job_argv(chosen)])}  (Spark if needed: {shlex.join(launch)})",
                file=sys.stderr,
                flush=True,
            )
            codes.append(
                run_once(chosen, launch, last_of_pass=last)
                if metrics is None
                else run_recorded(chosen, launch, report, metrics, table, last)
            )
    finally:
        end_pass()  # the Spark application the pass's runs shared
    code = max(codes, default=0)
    if metrics is None:
        return code
    from lakeflow.compaction.metrics import export_once

    try:
        export_once(metrics, export.textfile, export.pushgateway)
    except OSError as exc:  # the runs' outcome stands; the export's failure is its own error
        print(f"compact: exporting the run's metrics failed: {exc}", file=sys.stderr)
        return code or EXIT_ERROR
    return code


def run_recorded(
    options: CompactOptions,
    launch: Sequence[str],
    report: Path | None,
    metrics: CompactorMetrics,
    table: str,
    last_of_pass: bool,
) -> int:
    """One run, its figures recorded in ``metrics`` as ``table``'s."""
    from lakeflow.compaction.metrics import read_report

    with tempfile.TemporaryDirectory(prefix="lakeflow-compact-") as tmp:
        path = report or Path(tmp) / "report.json"
        path.unlink(missing_ok=True)  # a run that writes none is not read as the previous stream's
        started = time.monotonic()
        code = run_once(replace(options, report=path), launch, last_of_pass=last_of_pass)
        metrics.record(table, read_report(path), code, time.monotonic() - started)
    return code
