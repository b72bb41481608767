"""The compacted Iceberg table's schema (pyiceberg): the reading's fields plus ``ts``, partitioned by day.

The reading's fields are :data:`lakeflow.readings.FIELDS`, each required of an input record (a bad
record is quarantined). In Iceberg the columns are optional because both engines write nullable
Parquet columns (Spark's writer always does) and ``add_files`` requires the file and table
nullability to agree.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lakeflow.readings import FIELDS

if TYPE_CHECKING:
    from pyiceberg.partitioning import PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.table.sorting import SortOrder

TS = "ts"  # derived: timestamp_ms as an Iceberg timestamptz, the partition source
DAY = "ts_day"  # Iceberg partition field day(ts); also the folder name of data files
TS_FIELD_ID = len(FIELDS) + 1
PARTITION_FIELD_ID = 1000


def iceberg_schema() -> Schema:
    """The Iceberg table schema: the reading's fields and ``ts`` (field ids 1…9)."""
    from pyiceberg.schema import Schema
    from pyiceberg.types import DoubleType, LongType, NestedField, StringType, TimestamptzType

    types = {str: StringType(), int: LongType(), float: DoubleType()}
    columns = [NestedField(i, n, types[t], required=False) for i, (n, t) in enumerate(FIELDS, start=1)]
    columns.append(
        NestedField(
            TS_FIELD_ID,
            TS,
            TimestamptzType(),
            required=False,
            doc="timestamp_ms as a UTC timestamp; partitioned by day",
        )
    )
    return Schema(*columns)


def partition_spec() -> PartitionSpec:
    """``day(ts)``: one partition per UTC day of ``timestamp_ms``."""
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.transforms import DayTransform

    return PartitionSpec(
        PartitionField(source_id=TS_FIELD_ID, field_id=PARTITION_FIELD_ID, transform=DayTransform(), name=DAY)
    )


def sort_order() -> SortOrder:
    """Rows are written sorted by ``ts`` (then run and sequence) within each file."""
    from pyiceberg.table.sorting import SortField, SortOrder
    from pyiceberg.transforms import IdentityTransform

    return SortOrder(SortField(source_id=TS_FIELD_ID, transform=IdentityTransform()))
