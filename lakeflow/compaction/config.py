"""The compaction's options: lakeflow settings plus the job's own flags and variables."""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated

from pydantic import Field, field_validator

from lakeflow.compaction.continuous import OnCommit, Schedule
from lakeflow.compaction.engine import ENGINES, engine_for, submitted_master
from lakeflow.compaction.streams import chosen_stream
from lakeflow.schema import TableSchema
from lakeflow.settings import Settings, load_settings
from lakeflow.settings.env import (
    Duration,
    EnvModel,
    Invalid,
    LocalPath,
    Name,
    PositiveInt,
    SettingsError,
    choices,
    environment,
    load,
    parse_duration,
    url,
)
from lakeflow.streams import Stream

ENV_TABLE = "COMPACT_TABLE"
ENV_FILE_MB = "COMPACT_TARGET_FILE_MB"
ENV_BYTES_PER_ROW = "COMPACT_BYTES_PER_ROW"
ENV_ENGINE = "COMPACT_ENGINE"
ENV_ARROW_MAX_MB = "COMPACT_ARROW_MAX_MB"
ENV_MAX_BATCH_MB = "COMPACT_MAX_BATCH_MB"
ENV_DELETE_MIN_AGE = "COMPACT_DELETE_MIN_AGE"
ENV_LEASE_TTL = "COMPACT_LEASE_TTL"
ENV_LOOK_BACK = "COMPACT_LOOK_BACK"
ENV_RAW_RETENTION = "COMPACT_RAW_RETENTION"
ENV_CRASH_AT = "LAKEFLOW_COMPACT_CRASH_AT"
ENV_SMALL_FILE_MB = "COMPACT_SMALL_FILE_MB"
ENV_EXPIRE_OLDER_THAN = "COMPACT_EXPIRE_OLDER_THAN"
ENV_KEEP_LAST = "COMPACT_KEEP_LAST"
ENV_ORPHAN_MIN_AGE = "COMPACT_ORPHAN_MIN_AGE"
ENV_MAINTAIN_EVERY = "COMPACT_MAINTAIN_EVERY"
ENV_LEFTOVER_MIN_AGE = "COMPACT_LEFTOVER_MIN_AGE"
ENV_METRICS_PORT = "COMPACT_METRICS_PORT"
ENV_METRICS_TEXTFILE = "COMPACT_METRICS_TEXTFILE"
ENV_PUSHGATEWAY = "COMPACT_PUSHGATEWAY_URL"
DEFAULT_FILE_MB = 128
DEFAULT_MAX_BATCH_MB = 4096  # above bench-compact's 10M readings (1.7 GB): a run of a quiet backlog-free table is whole
DEFAULT_GROUP_MB = 256  # maintenance: small Parquet files merged in memory at once (at most)
DEFAULT_BYTES_PER_ROW = 40
DEFAULT_DELETE_MIN_AGE = "15m"  # many checkpoint intervals: Flink re-commits a restored checkpoint's files
DEFAULT_LEASE_TTL = "60s"
DEFAULT_LOOK_BACK = "1h"  # ≫ 2 checkpoint intervals + a checkpoint's duration: see docs/compaction.md
DEFAULT_EXPIRE_OLDER_THAN = "7d"  # a week of time travel; Iceberg's own default is 5 days
DEFAULT_KEEP_LAST = 1  # Iceberg's history.expire.min-snapshots-to-keep
DEFAULT_ORPHAN_MIN_AGE = "1d"  # far beyond any run (and its lease); see docs/compaction.md
DEFAULT_LEFTOVER_MIN_AGE = "1d"  # far beyond any checkpoint and restart; see docs/operations.md
CRASH_POINTS = ("after-write", "after-commit")
CRASH_EXIT = 86


class CompactEnv(EnvModel):
    """Compaction (lakeflow compact / make compact; docs/compaction.md).

    The raw JSON part files are compacted into an Iceberg table in the embedded SQLite catalog in
    LAKEFLOW_HOME, or in Lakekeeper's Iceberg REST catalog ({LAKEKEEPER}/catalog, same auth) when
    LAKEKEEPER / WAREHOUSE_ID are set. The command's flags win over these.
    """

    target_table: Name | None = Field(
        None,
        alias=ENV_TABLE,
        description="Iceberg table the raw JSON files are compacted into, in NAMESPACE "
        "(default: <TABLE>-compacted; must differ from TABLE).",
    )
    target_file_mb: PositiveInt = Field(
        DEFAULT_FILE_MB, alias=ENV_FILE_MB, description="Target Parquet file size in MiB."
    )
    bytes_per_row: PositiveInt = Field(
        DEFAULT_BYTES_PER_ROW,
        alias=ENV_BYTES_PER_ROW,
        description="Parquet bytes per reading assumed to size files until the table has statistics.",
    )
    engine: Annotated[str, choices(ENGINES)] = Field(
        "auto",
        alias=ENV_ENGINE,
        description="Who parses and writes: auto | spark | arrow. auto = arrow (pyarrow in the driver, no JVM) "
        f"for batches below the engines' crossover that fit in memory ({ENV_ARROW_MAX_MB}), spark above; spark "
        "whenever the driver is given a cluster master (spark://, yarn, k8s://: the executors do the work); same "
        "output either way; the run's report says which ran and why.",
    )
    arrow_max_mb: PositiveInt | None = Field(
        None,
        alias=ENV_ARROW_MAX_MB,
        description="auto: the largest batch (MiB of new raw JSON) the arrow engine takes; it holds ~2.1x that "
        "in memory at its peak. Unset: the engines' crossover as make bench-compact measured it on 2 cores "
        "(2000), or what fits in half the memory available when the run starts if less (the container's limit "
        "counts); spark above. Set it to the crossover make bench-compact prints on your machine.",
    )
    max_batch_mb: PositiveInt = Field(
        DEFAULT_MAX_BATCH_MB,
        alias=ENV_MAX_BATCH_MB,
        description="A run takes at most this many MiB of new raw JSON, oldest files first; the rest waits for "
        "the next: a stream with a backlog takes its turns with the others' runs (compact --every over a "
        "pipeline) instead of holding the service for the whole backlog.",
    )
    delete_min_age_s: Duration = Field(
        parse_duration(DEFAULT_DELETE_MIN_AGE),
        examples=[DEFAULT_DELETE_MIN_AGE],
        alias=ENV_DELETE_MIN_AGE,
        description="--delete-source deletes only compacted raw files at least this old (90s, 15m, 2h, 1d …): "
        "Flink re-commits the files of a checkpoint it restores from. Several checkpoint intervals "
        "+ restarts.",
    )
    look_back_s: Duration = Field(
        parse_duration(DEFAULT_LOOK_BACK),
        examples=[DEFAULT_LOOK_BACK],
        alias=ENV_LOOK_BACK,
        description="A run lists the raw table's hour buckets from this long before the newest bucket the "
        "ledger holds on (older ones only with --full-scan): late commits land at most about two "
        "checkpoint intervals late.",
    )
    raw_retention_s: Duration | None = Field(
        None,
        alias=ENV_RAW_RETENTION,
        description="Delete raw files compacted longer ago than this (per hour bucket; 7d, 30d …; also only "
        f"once older than {ENV_DELETE_MIN_AGE}). Unset: keep them (unless --delete-source).",
    )
    lease_ttl_s: Duration = Field(
        parse_duration(DEFAULT_LEASE_TTL),
        examples=[DEFAULT_LEASE_TTL],
        alias=ENV_LEASE_TTL,
        description="One compaction per table at a time on any host: the lease lapses this long after its "
        "holder stopped renewing it (renewed every third of it; at least 3s).",
    )
    crash_at: Annotated[str, choices(CRASH_POINTS)] | None = Field(
        None,
        alias=ENV_CRASH_AT,
        description="Tests only: hard-exit the job at a point (after-write | after-commit) to prove crash recovery.",
    )

    small_file_mb: PositiveInt | None = Field(
        None,
        alias=ENV_SMALL_FILE_MB,
        description="lakeflow maintain / compact --maintain: a data file under this many MiB is small; a day "
        "partition with 2 or more small files has them merged (default: 3/4 of the target file size).",
    )
    expire_older_than_s: Duration = Field(
        parse_duration(DEFAULT_EXPIRE_OLDER_THAN),
        examples=[DEFAULT_EXPIRE_OLDER_THAN],
        alias=ENV_EXPIRE_OLDER_THAN,
        description="lakeflow maintain: expire snapshots older than this (90s, 15m, 2h, 7d …); the table's "
        "time travel reaches back this far.",
    )
    keep_last: PositiveInt = Field(
        DEFAULT_KEEP_LAST,
        alias=ENV_KEEP_LAST,
        description="lakeflow maintain: keep at least this many of the newest snapshots whatever their age "
        "(the current one always).",
    )
    orphan_min_age_s: Duration = Field(
        parse_duration(DEFAULT_ORPHAN_MIN_AGE),
        examples=[DEFAULT_ORPHAN_MIN_AGE],
        alias=ENV_ORPHAN_MIN_AGE,
        description="lakeflow maintain: delete files under the table's data/ and metadata/ that no snapshot "
        "or metadata references only once they are at least this old (a younger one may belong "
        "to a commit in flight).",
    )
    leftover_min_age_s: Duration = Field(
        parse_duration(DEFAULT_LEFTOVER_MIN_AGE),
        examples=[DEFAULT_LEFTOVER_MIN_AGE],
        alias=ENV_LEFTOVER_MIN_AGE,
        description="lakeflow maintain: abort the raw table's open S3 multipart uploads and delete its hidden "
        "in-progress part files (what killed Flink writers leave) only once they are at least this old: "
        "longer than any checkpoint takes and than a job may stay down and still be restored from its "
        "last checkpoint (a restored job completes the uploads that checkpoint names).",
    )
    maintain_every_s: Duration | None = Field(
        None,
        alias=ENV_MAINTAIN_EVERY,
        description="lakeflow compact --every: also maintain the table (as lakeflow maintain does, under the "
        "run's lease) with the first run and then once this long has passed (1h, 1d …). Unset: "
        "never.",
    )

    metrics_port: Annotated[int, Field(ge=1, le=65535)] | None = Field(
        None,
        alias=ENV_METRICS_PORT,
        description="lakeflow compact --every: serve Prometheus metrics on this port (all interfaces, path "
        "/metrics; names in docs/operations.md). Unset: none.",
    )
    metrics_textfile: LocalPath | None = Field(
        None,
        alias=ENV_METRICS_TEXTFILE,
        description="A single lakeflow compact: write the run's metrics to this file for node_exporter's "
        "textfile collector (replaced atomically; name it *.prom). Unset: none.",
    )
    pushgateway_url: Annotated[str, url("http://localhost:9091", base=True)] | None = Field(
        None,
        alias=ENV_PUSHGATEWAY,
        description="A single lakeflow compact: push the run's metrics to this Prometheus Pushgateway (group "
        "job=lakeflow_compact, replaced by each run). Unset: none.",
    )

    @field_validator("lease_ttl_s")
    @classmethod
    def _renewable(cls, ttl: float) -> float:
        if ttl < 3:
            raise Invalid("at least 3s (the lease is renewed every third of it)", None)
        return ttl

    @classmethod
    def help(cls, field: str) -> str:
        """A flag's help: the field's description, its variable and its default (a duration's as
        written, e.g. 15m: its example, which .env.example shows too)."""
        info = cls.model_fields[field]
        default = info.examples[0] if info.examples else info.default
        return f"{info.description} (${info.alias}; default {default})"


@dataclass(frozen=True)
class MaintainOptions:
    """What ``lakeflow maintain`` (and ``compact --maintain``) does to the table: see lakeflow.compaction.maintain."""

    target_file_bytes: int = DEFAULT_FILE_MB << 20  # merged files aim at this size
    small_file_bytes: int = (DEFAULT_FILE_MB << 20) * 3 // 4  # a file under this size is small
    group_max_bytes: int = DEFAULT_GROUP_MB << 20  # small files merged in memory at once (at most)
    expire_older_than_s: float = parse_duration(DEFAULT_EXPIRE_OLDER_THAN)
    keep_last: int = DEFAULT_KEEP_LAST
    orphan_min_age_s: float = parse_duration(DEFAULT_ORPHAN_MIN_AGE)
    leftover_min_age_s: float = parse_duration(DEFAULT_LEFTOVER_MIN_AGE)
    dry_run: bool = False  # list what would change; change nothing


@dataclass(frozen=True)
class CompactConfig:
    """What one compaction run needs to know. Build with :func:`load_config`."""

    settings: Settings
    stream: Stream  # the raw table, its declared schema and the Iceberg table it is compacted into
    target_file_bytes: int  # aim for Parquet files of about this size
    bytes_per_row: int  # Parquet bytes per row assumed until the table has statistics
    engine: str  # auto | spark | arrow (lakeflow.compaction.engine)
    arrow_max_bytes: int | None  # auto: batches of at most this many raw bytes go to arrow (None: by memory)
    max_batch_bytes: int  # a run takes at most this many bytes of new raw files (at least one file)
    delete_source: bool  # delete compacted raw files after the commit …
    delete_min_age_s: float  # … once they are at least this old (Flink may re-commit younger ones)
    lease_ttl_s: float  # the lease on the table lapses this long after its holder stops renewing
    look_back_s: float  # list buckets from this long before the ledger's newest bucket on …
    full_scan: bool  # … or every bucket
    raw_retention_s: float | None  # delete raw files compacted longer ago than this (None: keep)
    report_path: Path | None  # also write the summary as JSON here
    run_id: str
    crash_at: str | None = None  # test hook: hard-exit at this point (see CRASH_POINTS)
    maintain: bool = False  # run lakeflow.compaction.maintain after a successful run
    maintenance: MaintainOptions = MaintainOptions()
    spark_options: tuple[str, ...] = ()  # spark-submit's options for a Spark this process launches
    on_commit: OnCommit | None = None  # told the report at its commit (the service)
    last_of_pass: bool = False  # no later run of the pass uses its Spark session: it stops once the engine is done

    @property
    def schema(self) -> TableSchema:
        """The records' declared schema and the table's layout."""
        return self.stream.schema

    @property
    def namespace(self) -> tuple[str, ...]:
        return self.stream.namespace

    @property
    def target_table(self) -> str:
        """The Iceberg table's name, in the raw table's namespace."""
        return self.stream.iceberg_table

    @property
    def target_name(self) -> str:
        """``namespace.table`` of the Iceberg table."""
        return self.stream.iceberg_name


@dataclass(frozen=True)
class CompactOptions:
    """A run's flags (``lakeflow compact``'s, ``jobs/compact.py``'s, ``lakeflow maintain``'s and
    ``status``'s): None or False where not given, so that their variables apply."""

    stream: str | None = None
    target_table: str | None = None
    target_file_mb: int | None = None
    local: bool = False
    engine: str | None = None
    delete_source: bool = False
    delete_min_age: str | None = None
    raw_retention: str | None = None
    look_back: str | None = None
    full_scan: bool = False
    report: Path | None = None
    maintain: bool = False
    small_file_mb: int | None = None
    expire_older_than: str | None = None
    keep_last: int | None = None
    orphan_min_age: str | None = None
    leftover_min_age: str | None = None


def load_config(args: CompactOptions = CompactOptions(), env: Mapping[str, str] | None = None) -> CompactConfig:
    """The run's flags over settings and ``COMPACT_*`` variables, for the stream ``args.stream`` names
    (or the pipeline's only stream); errors name the variable, or the stream."""
    settings = load_settings(env, local=True if args.local else None)
    stream = chosen_stream(settings, args.stream)
    flags = {
        ENV_TABLE: args.target_table,
        ENV_ENGINE: args.engine,
        ENV_DELETE_MIN_AGE: args.delete_min_age,
        ENV_LOOK_BACK: args.look_back,
        ENV_RAW_RETENTION: args.raw_retention,
        ENV_FILE_MB: None if args.target_file_mb is None else str(args.target_file_mb),
        ENV_EXPIRE_OLDER_THAN: args.expire_older_than,
        ENV_ORPHAN_MIN_AGE: args.orphan_min_age,
        ENV_LEFTOVER_MIN_AGE: args.leftover_min_age,
        **{
            name: None if flag is None else str(flag)
            for name, flag in ((ENV_SMALL_FILE_MB, args.small_file_mb), (ENV_KEEP_LAST, args.keep_last))
        },
    }
    values = {**environment(env), **{k: v for k, v in flags.items() if v}}
    problems = []  # the other checks are the fields'
    if args.target_table and settings.pipeline is not None:
        problems.append("--target-table: the pipeline file names each stream's Iceberg table (iceberg-table)")
    table = values.get(ENV_TABLE) or stream.iceberg_table
    if table == stream.table:
        problems.append(
            f"{ENV_TABLE}={table!r}: must differ from TABLE (Lakekeeper keeps generic and "
            "Iceberg tables in one name space)"
        )
    env_ = load(CompactEnv, {**values, ENV_TABLE: table}, "compaction settings", problems)
    look_back_s = env_.look_back_s if args.look_back or stream.look_back_s is None else stream.look_back_s
    return CompactConfig(
        settings=settings,
        stream=replace(stream, iceberg_table=table),
        target_file_bytes=env_.target_file_mb << 20,
        bytes_per_row=env_.bytes_per_row,
        engine=env_.engine if env_.engine != "auto" else engine_for("auto", submitted_master()),
        arrow_max_bytes=None if env_.arrow_max_mb is None else env_.arrow_max_mb << 20,
        max_batch_bytes=env_.max_batch_mb << 20,
        delete_source=args.delete_source,
        delete_min_age_s=env_.delete_min_age_s,
        lease_ttl_s=env_.lease_ttl_s,
        look_back_s=look_back_s,
        full_scan=args.full_scan,
        raw_retention_s=env_.raw_retention_s,
        report_path=args.report.resolve() if args.report else None,
        run_id=str(uuid.uuid4()),
        crash_at=env_.crash_at,
        maintain=args.maintain,
        maintenance=MaintainOptions(
            target_file_bytes=env_.target_file_mb << 20,
            small_file_bytes=(env_.small_file_mb << 20 if env_.small_file_mb else (env_.target_file_mb << 20) * 3 // 4),
            group_max_bytes=(env_.arrow_max_mb or DEFAULT_GROUP_MB) << 20,
            expire_older_than_s=env_.expire_older_than_s,
            keep_last=env_.keep_last,
            orphan_min_age_s=env_.orphan_min_age_s,
            leftover_min_age_s=env_.leftover_min_age_s,
        ),
    )


@dataclass(frozen=True)
class ServiceOptions:
    """``lakeflow compact``'s flags of the service around the runs: the schedule and the metrics."""

    every: str | None = None
    maintain_every: str | None = None
    print_command: bool = False
    maintain: bool = False
    metrics_port: int | None = None
    metrics_textfile: str | None = None
    pushgateway: str | None = None


def schedule(args: ServiceOptions, env: Mapping[str, str] | None = None) -> Schedule | None:
    """``lakeflow compact --every``'s schedule (None: a single run); ``--maintain-every`` over
    ``COMPACT_MAINTAIN_EVERY``, which applies only with ``--every``."""
    if not args.every:
        if args.maintain_every:
            raise SettingsError("--maintain-every applies only with --every (a single run: --maintain)")
        return None
    problems: list[str] = []
    every = 0.0
    try:
        every = parse_duration(args.every)
    except ValueError:
        problems.append(f"--every {args.every!r}: expected a duration such as 90s, 15m, 2h or 1d")
    if args.print_command:
        problems.append("--every and --print-command exclude each other")
    if args.maintain and args.maintain_every:
        problems.append("--maintain (every run) and --maintain-every exclude each other")
    values = environment(env)
    if args.maintain_every:
        values[ENV_MAINTAIN_EVERY] = args.maintain_every
    env_ = load(CompactEnv, values, "compaction settings", problems)
    if every <= 0:
        raise SettingsError(f"--every {args.every!r}: must be more than 0")
    return Schedule(every_s=every, maintain_every_s=env_.maintain_every_s)


@dataclass(frozen=True)
class MetricsExport:
    """Where ``lakeflow compact`` puts its metrics: served on a port (with ``--every``), or, for a
    single run, a textfile and/or a Pushgateway."""

    port: int | None = None
    textfile: Path | None = None
    pushgateway: str | None = None


def metrics_export(args: ServiceOptions, env: Mapping[str, str] | None = None) -> MetricsExport:
    """``--metrics-port`` / ``--metrics-textfile`` / ``--pushgateway`` over their variables; the port
    applies only with ``--every``, the other two only to a single run."""
    values = environment(env)
    flags = {
        ENV_METRICS_PORT: None if args.metrics_port is None else str(args.metrics_port),
        ENV_METRICS_TEXTFILE: args.metrics_textfile,
        ENV_PUSHGATEWAY: args.pushgateway,
    }
    values.update({k: v for k, v in flags.items() if v})
    problems: list[str] = []
    if args.metrics_port is not None and not args.every:
        problems.append("--metrics-port applies only with --every (a single run: --metrics-textfile, --pushgateway)")
    if args.every and (args.metrics_textfile or args.pushgateway):
        problems.append("--metrics-textfile / --pushgateway apply to a single run (with --every: --metrics-port)")
    env_ = load(CompactEnv, values, "compaction settings", problems)
    if args.every:
        return MetricsExport(port=env_.metrics_port)
    return MetricsExport(textfile=env_.metrics_textfile, pushgateway=env_.pushgateway_url)


def crash_point(config: CompactConfig, name: str) -> None:
    """Test hook: end the process at once (no cleanup, no lineage) when ``crash_at`` names this point."""
    if config.crash_at == name:
        import logging
        import sys

        logging.getLogger(__name__).warning("%s=%s: crashing the run on purpose", ENV_CRASH_AT, name)
        for handler in logging.getLogger().handlers:
            handler.flush()
        sys.stdout.flush()
        os._exit(CRASH_EXIT)
