"""Every path a run creates, named here once: data files, staging folder, ledger (index, segments), intent,
quarantine.

Data file names say what is inside — Pinot's segment naming (table, time range, sequence) — and
whose they are:
``data/ts_day=2026-11-21/sensor-readings-compacted__2026-11-21__20261121T101500123Z__20261121T115959999Z__00000007-001__<run id>.parquet``:
in the partition's folder (Iceberg's ``name=value`` path; none for an unpartitioned table): table,
partition values, first and last event time (UTC, ms), the Iceberg sequence number of the commit that
adds the file, the file's place among that commit's files, and the run. Two runs never name a file
alike, so a run's leftovers can be told from another run's committed files.

The bookkeeping lives under the target table's ``_lakeflow/compaction/`` (only the compactor
writes the Iceberg table's folder; Iceberg's orphan-file removal skips ``_``-prefixed folders), and
what a run sets aside under ``_lakeflow/quarantine/``: its bad records in ``records/run=<run id>/``,
copies of its empty or malformed raw files in ``files/run=<run id>/<raw path>`` — never in the raw
table, which the compaction may only read.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lakeflow.compaction.rows import WrittenFile

SEPARATOR = "__"
STATE_DIR = "_lakeflow/compaction"  # target-relative: ledger indexes, intents, the lease
SEGMENTS_DIR = "_lakeflow/segments"  # target-relative: ledger segments, one folder per run that wrote some
QUARANTINE_DIR = "_lakeflow/quarantine"  # target-relative: bad records and copies of bad files, by run
STAGING = "data/_staging"  # target-relative: engines write here before the final rename
UUID = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
LEDGER_PATTERN = re.compile(rf"{STATE_DIR}/ledger-{UUID}\.json\.gz")


def timestamp(ms: int) -> str:
    """``20261121T101500123Z``: a UTC instant to the millisecond, sortable as text."""
    t = datetime.fromtimestamp(ms / 1000, tz=timezone.utc)
    return t.strftime("%Y%m%dT%H%M%S") + f"{ms % 1000:03d}Z"


def is_run_id(run_id: str) -> bool:
    """True for a run id as runs make them (a lowercase UUID)."""
    try:
        return str(uuid.UUID(run_id)) == run_id
    except (ValueError, TypeError, AttributeError):
        return False


def staging_dir(run_id: str) -> str:
    return f"{STAGING}/{run_id}"


def records_dir(run_id: str) -> str:
    """Where a run's records failing the schema go (target-relative)."""
    return f"{QUARANTINE_DIR}/records/run={run_id}"


def quarantined_files_dir(run_id: str) -> str:
    """Where a run's copies of the raw files it quarantined whole go (target-relative)."""
    return f"{QUARANTINE_DIR}/files/run={run_id}"


def ledger_name(run_id: str) -> str:
    return f"{STATE_DIR}/ledger-{run_id}.json.gz"


def segment_dir(run_id: str) -> str:
    return f"{SEGMENTS_DIR}/{run_id}"


def intent_name(run_id: str) -> str:
    return f"{STATE_DIR}/intent-{run_id}.json"


def is_data_file_of(rel: str, run_id: str) -> bool:
    """True if ``rel`` is a final data file path that run ``run_id`` could have named."""
    return re.fullmatch(rf"data/(?:[^/=_][^/=]*=[^/]*/)*[^/]+{SEPARATOR}{re.escape(run_id)}\.parquet", rel) is not None


def data_file_name(table: str, label: str, min_ms: int, max_ms: int, sequence: int, index: int, run_id: str) -> str:
    return (
        SEPARATOR.join((table, label, timestamp(min_ms), timestamp(max_ms), f"{sequence:08d}-{index:03d}", run_id))
        + ".parquet"
    )


def final_paths(files: Sequence[WrittenFile], table: str, sequence: int, run_id: str) -> list[str]:
    """Final target-relative paths for ``files``, numbered in (partition, time) order; same order as given."""
    order = sorted(
        range(len(files)),
        key=lambda i: (files[i].partition_path, files[i].min_ms, files[i].max_ms, files[i].rel),
    )
    paths = [""] * len(files)
    for index, i in enumerate(order, start=1):
        f = files[i]
        name = data_file_name(table, f.label, f.min_ms, f.max_ms, sequence, index, run_id)
        paths[i] = f"data/{f.partition_path}/{name}" if f.partition_path else f"data/{name}"
    return paths
