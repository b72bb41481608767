"""The sensor reading as parsed from JSON and as stored in Iceberg (pyiceberg): one list of fields.

Every field is required of an input record (a record with a missing, null or mistyped field is
quarantined); in Iceberg the columns are optional because Spark writes nullable Parquet columns
and ``add_files`` requires the file and table nullability to agree.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyiceberg.partitioning import PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.table.sorting import SortOrder

# (name, type) of a reading, in file order; types are Spark SQL names.
FIELDS: tuple[tuple[str, str], ...] = (
    ("sensor_id", "string"),
    ("run_id", "string"),
    ("seq", "bigint"),
    ("timestamp_ms", "bigint"),
    ("temperature", "double"),
    ("humidity", "double"),
    ("pressure", "double"),
    ("location", "string"),
)
NAMES: tuple[str, ...] = tuple(name for name, _ in FIELDS)
KEY: tuple[str, str] = ("run_id", "seq")  # unique per reading: a run of the ingestion job + its sequence
TIME = "timestamp_ms"
TS = "ts"              # derived: timestamp_ms as an Iceberg timestamptz, the partition source
DAY = "ts_day"         # Iceberg partition field day(ts); also the folder name of data files
TS_FIELD_ID = len(FIELDS) + 1
PARTITION_FIELD_ID = 1000


def iceberg_schema() -> "Schema":
    """The Iceberg table schema: the reading's fields and ``ts`` (field ids 1…9)."""
    from pyiceberg.schema import Schema
    from pyiceberg.types import DoubleType, LongType, NestedField, StringType, TimestamptzType

    types = {"string": StringType(), "bigint": LongType(), "double": DoubleType()}
    columns = [NestedField(i, n, types[t], required=False) for i, (n, t) in enumerate(FIELDS, start=1)]
    columns.append(NestedField(TS_FIELD_ID, TS, TimestamptzType(), required=False,
                               doc="timestamp_ms as a UTC timestamp; partitioned by day"))
    return Schema(*columns)


def partition_spec() -> "PartitionSpec":
    """``day(ts)``: one partition per UTC day of ``timestamp_ms``."""
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.transforms import DayTransform

    return PartitionSpec(PartitionField(source_id=TS_FIELD_ID, field_id=PARTITION_FIELD_ID,
                                        transform=DayTransform(), name=DAY))


def sort_order() -> "SortOrder":
    """Rows are written sorted by ``ts`` (then run and sequence) within each file."""
    from pyiceberg.table.sorting import SortField, SortOrder
    from pyiceberg.transforms import IdentityTransform

    return SortOrder(SortField(source_id=TS_FIELD_ID, transform=IdentityTransform()))
