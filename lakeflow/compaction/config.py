"""The compaction's options: lakeflow settings plus the job's own flags and variables."""

from __future__ import annotations

import argparse
import os
import re
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional, Sequence

from lakeflow.compaction.engine import ENGINES
from lakeflow.settings import Settings, SettingsError, load_settings, read_env_file

ENV_TABLE = "COMPACT_TABLE"
ENV_FILE_MB = "COMPACT_TARGET_FILE_MB"
ENV_BYTES_PER_ROW = "COMPACT_BYTES_PER_ROW"
ENV_ENGINE = "COMPACT_ENGINE"
ENV_ARROW_MAX_MB = "COMPACT_ARROW_MAX_MB"
ENV_DELETE_MIN_AGE = "COMPACT_DELETE_MIN_AGE"
ENV_LEASE_TTL = "COMPACT_LEASE_TTL"
ENV_CRASH_AT = "LAKEFLOW_COMPACT_CRASH_AT"
DEFAULT_FILE_MB = 128
DEFAULT_ARROW_MAX_MB = 256
DEFAULT_BYTES_PER_ROW = 40
DEFAULT_DELETE_MIN_AGE = "15m"   # many checkpoint intervals: Flink re-commits a restored checkpoint's files
DEFAULT_LEASE_TTL = "60s"
CRASH_POINTS = ("after-write", "after-commit")
CRASH_EXIT = 86
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_-]{0,127}$")
_DURATION = re.compile(r"^(\d+)(ms|s|m|h|d)?$")
_UNIT_S = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str) -> float:
    """``90s``, ``15m``, ``2h``, ``1d``, ``500ms`` or plain seconds → seconds; ValueError otherwise."""
    m = _DURATION.match(text.strip())
    if not m:
        raise ValueError(f"{text!r}: expected a duration such as 90s, 15m, 2h or 1d")
    return int(m.group(1)) * _UNIT_S[m.group(2) or "s"]


@dataclass(frozen=True)
class CompactConfig:
    """What one compaction run needs to know. Build with :func:`load_config`."""

    settings: Settings
    target_table: str            # Iceberg table name, in the raw table's namespace
    target_file_bytes: int       # aim for Parquet files of about this size
    bytes_per_row: int           # Parquet bytes per row assumed until the table has statistics
    engine: str                  # auto | spark | arrow (lakeflow.compaction.engine)
    arrow_max_bytes: int         # auto: batches of at most this many raw bytes go to the arrow engine
    delete_source: bool          # delete compacted raw files after the commit …
    delete_min_age_s: float      # … once they are at least this old (Flink may re-commit younger ones)
    lease_ttl_s: float           # the lease on the table lapses this long after its holder stops renewing
    move_quarantined: bool       # move quarantined raw files to <raw>/_quarantine/
    report_path: Optional[Path]  # also write the summary as JSON here
    run_id: str
    crash_at: Optional[str] = None  # test hook: hard-exit at this point (see CRASH_POINTS)

    @property
    def namespace(self) -> tuple[str, ...]:
        return self.settings.namespace

    @property
    def target_name(self) -> str:
        """``namespace.table`` of the Iceberg table."""
        return ".".join((*self.namespace, self.target_table))



def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The job's flags (shared by ``jobs/compact.py`` and ``lakeflow compact``)."""
    parser.add_argument("--target-table", metavar="NAME",
                        help=f"Iceberg table name in NAMESPACE (${ENV_TABLE}; default: TABLE-compacted)")
    parser.add_argument("--target-file-mb", type=int, metavar="MB",
                        help=f"target Parquet file size in MiB (${ENV_FILE_MB}; default {DEFAULT_FILE_MB})")
    parser.add_argument("--engine", choices=ENGINES,
                        help=f"who parses and writes: spark, arrow (pyarrow in the driver), or auto — arrow "
                             f"for batches up to ${ENV_ARROW_MAX_MB} (default {DEFAULT_ARROW_MAX_MB}) MiB "
                             f"(${ENV_ENGINE}; default auto)")
    parser.add_argument("--delete-source", action="store_true",
                        help="delete the compacted raw files after a successful commit, once they are "
                             "older than --delete-min-age")
    parser.add_argument("--delete-min-age", metavar="DURATION",
                        help="with --delete-source: keep raw files younger than this, which Flink may still "
                             f"re-commit when it restores a checkpoint (${ENV_DELETE_MIN_AGE}; default "
                             f"{DEFAULT_DELETE_MIN_AGE}; e.g. 90s, 15m, 2h)")
    parser.add_argument("--move-quarantined", action="store_true",
                        help="move quarantined raw files to <raw location>/_quarantine/")
    parser.add_argument("--report", type=Path, metavar="PATH", help="write the run summary as JSON to PATH")
    parser.add_argument("--local", action="store_true", help="use the embedded local catalogs")


def job_argv(args: argparse.Namespace) -> list[str]:
    """The flags of :func:`add_arguments` back as a command line (for spark-submit)."""
    argv: list[str] = []
    if args.target_table:
        argv += ["--target-table", args.target_table]
    if args.target_file_mb is not None:
        argv += ["--target-file-mb", str(args.target_file_mb)]
    if args.engine:
        argv += ["--engine", args.engine]
    if args.delete_min_age:
        argv += ["--delete-min-age", args.delete_min_age]
    for flag in ("delete_source", "move_quarantined", "local"):
        if getattr(args, flag):
            argv.append("--" + flag.replace("_", "-"))
    if args.report:
        argv += ["--report", str(args.report.resolve())]
    return argv


def load_config(argv: Optional[Sequence[str]] = None, env: Optional[Mapping[str, str]] = None) -> CompactConfig:
    """Parse the job's flags and read settings and ``COMPACT_*`` variables; errors name the variable."""
    parser = argparse.ArgumentParser(prog="compact", description="Compact raw JSON part files into Iceberg.")
    add_arguments(parser)
    args = parser.parse_args(argv)
    environ = dict(os.environ if env is None else env)
    settings = load_settings(environ, local=True if args.local else None)
    env_file = Path(environ.get("LAKEFLOW_ENV_FILE") or ".env.local")
    environ = {**read_env_file(env_file), **{k: v for k, v in environ.items() if v != ""}}
    errors: list[str] = []

    table = args.target_table or environ.get(ENV_TABLE) or f"{settings.table}-compacted"
    if not _NAME.match(table):
        errors.append(f"{ENV_TABLE}={table!r}: expected letters, digits, '_' or '-' (at most 128)")
    elif table == settings.table:
        errors.append(f"{ENV_TABLE}={table!r}: must differ from TABLE (Lakekeeper keeps generic and "
                      "Iceberg tables in one name space)")

    def positive(flag: Optional[int], name: str, default: int) -> int:
        raw = str(flag) if flag is not None else environ.get(name) or str(default)
        if not raw.isdigit() or int(raw) <= 0:
            errors.append(f"{name}={raw!r}: expected a positive whole number")
            return default
        return int(raw)

    file_mb = positive(args.target_file_mb, ENV_FILE_MB, DEFAULT_FILE_MB)
    bytes_per_row = positive(None, ENV_BYTES_PER_ROW, DEFAULT_BYTES_PER_ROW)
    arrow_max_mb = positive(None, ENV_ARROW_MAX_MB, DEFAULT_ARROW_MAX_MB)
    engine = args.engine or environ.get(ENV_ENGINE) or "auto"
    if engine not in ENGINES:
        errors.append(f"{ENV_ENGINE}={engine!r}: expected one of {', '.join(ENGINES)}")

    def duration(flag: Optional[str], name: str, default: str) -> float:
        raw = flag or environ.get(name) or default
        try:
            return parse_duration(raw)
        except ValueError as exc:
            errors.append(f"{name}={exc}")
            return parse_duration(default)

    delete_min_age_s = duration(args.delete_min_age, ENV_DELETE_MIN_AGE, DEFAULT_DELETE_MIN_AGE)
    lease_ttl_s = duration(None, ENV_LEASE_TTL, DEFAULT_LEASE_TTL)
    if lease_ttl_s < 3:
        errors.append(f"{ENV_LEASE_TTL}: at least 3s (the lease is renewed every third of it)")
    crash_at = environ.get(ENV_CRASH_AT) or None
    if crash_at and crash_at not in CRASH_POINTS:
        errors.append(f"{ENV_CRASH_AT}={crash_at!r}: expected one of {', '.join(CRASH_POINTS)}")
    if errors:
        raise SettingsError("invalid compaction settings:\n  " + "\n  ".join(errors))
    return CompactConfig(settings=settings, target_table=table, target_file_bytes=file_mb * 1024 * 1024,
                         bytes_per_row=bytes_per_row, engine=engine, arrow_max_bytes=arrow_max_mb * 1024 * 1024,
                         delete_source=args.delete_source, delete_min_age_s=delete_min_age_s,
                         lease_ttl_s=lease_ttl_s,
                         move_quarantined=args.move_quarantined,
                         report_path=args.report.resolve() if args.report else None,
                         run_id=str(uuid.uuid4()), crash_at=crash_at)


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

