"""What the ingestion sink leaves at a table location: ``<bucket>/part-<subtask uuid>-<n>.json``,
the bucket the UTC hour it wrote the file's readings in (:data:`lakeflow.readings.BUCKET_FORMAT`)."""

from __future__ import annotations

import re
import time
from datetime import datetime, timezone
from pathlib import Path

from lakeflow.readings import bucket_name, bucket_time

PART = re.compile(r"part-[0-9a-f-]{36}-\d+\.json")


def assert_sink_path(rel: str, started: float) -> None:
    """``rel`` (a path under the location) is a committed part file in the bucket of an hour between
    ``started`` (epoch seconds) and now."""
    bucket, _, name = rel.partition("/")
    assert PART.fullmatch(name), f"not a committed part file in a bucket: {rel}"
    first, last = (bucket_name(datetime.fromtimestamp(t, timezone.utc)) for t in (started, time.time()))
    assert bucket_time(bucket) is not None and first <= bucket <= last, f"{rel}: not in a bucket of {first}..{last}"


def files_under(table_dir: Path) -> dict[str, Path]:
    """Every file under a local table directory, by its path relative to it (``<bucket>/<name>``)."""
    if not table_dir.is_dir():
        return {}
    return {p.relative_to(table_dir).as_posix(): p for p in sorted(table_dir.rglob("*")) if p.is_file()}
