"""The contract between the ingestion job and the compaction: the part files holding the records (whose
fields are the declared schema's, :mod:`lakeflow.schema`).

The Flink job (:mod:`lakeflow.ingest`) writes each checkpoint's records under the raw table's
location as *part files* ``part-<subtask uuid>-<n>.json``: one JSON array of record objects each,
one record per line — in hour buckets ``<bucket>/part-….json``, the UTC hour the sink wrote the
records in (:data:`BUCKET_FORMAT`, Flink's ``DateTimeBucketAssigner``), which the compaction lists
from its look-back window on (tables written before, or by other writers, may hold them directly
under the location). Until its checkpoint commits it, a file is hidden
(``.part-….json.inprogress.<id>``). The compaction (:mod:`lakeflow.compaction`) reads the committed
files (:func:`is_committed_part`).
"""

from __future__ import annotations

from datetime import datetime, timezone

PART_PREFIX = "part"
PART_SUFFIX = ".json"
BUCKET_JAVA_FORMAT = "yyyy-MM-dd--HH"  # the sink's DateTimeBucketAssigner, in BUCKET_ZONE: one folder per hour
BUCKET_ZONE = "UTC"  # its time zone (a Java ZoneId), the zone of bucket_name's hours
BUCKET_FORMAT = "%Y-%m-%d--%H"  # the same, for Python
BUCKET_S = 3600  # a bucket spans this many seconds


def bucket_name(t: datetime) -> str:
    """The bucket the sink writes into at ``t``."""
    return t.astimezone(timezone.utc).strftime(BUCKET_FORMAT)


def bucket_time(name: str) -> datetime | None:
    """When bucket ``name`` starts (UTC); None for a folder that is not a time bucket."""
    try:
        t = datetime.strptime(name, BUCKET_FORMAT).replace(tzinfo=timezone.utc)
    except ValueError:
        return None
    return t if bucket_name(t) == name else None


def is_in_progress(rel: str) -> bool:
    """True for a part file Flink's FileSink is still writing (or a crashed writer left): a hidden
    ``.part-….inprogress.<id>`` name. Such a file holds no committed reading."""
    name = rel.rsplit("/", 1)[-1]
    return name.startswith(".") and ".inprogress" in name


def is_committed_part(rel: str) -> bool:
    """True for a committed part file (``rel``: its path under the table location): a ``.json`` file
    with no hidden component in its path.

    Flink's FileSink keeps in-progress and pending files hidden (``.part-….json.inprogress.<id>``)
    until the checkpoint commits them; names starting with ``_`` (``_quarantine/``, ``_lakeflow/``,
    ``_SUCCESS``) are bookkeeping, as in Hadoop's convention.
    """
    parts = rel.split("/")
    return (
        rel.endswith(PART_SUFFIX)
        and ".inprogress" not in parts[-1]
        and not any(p.startswith((".", "_")) or p == "" for p in parts)
    )
