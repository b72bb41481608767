"""The table's schema, declared once (``TABLE_SCHEMA``: a JSON Schema file) and taken from here by
every part: the ingestion job's validator and generator, both compaction engines, the Iceberg table,
the query and the lineage (:mod:`lakeflow.schema.model`, :mod:`lakeflow.schema.declared`); its
evolution (:mod:`lakeflow.schema.evolution`) and the record contract (:mod:`lakeflow.schema.records`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lakeflow.schema.declared import load_schema
from lakeflow.schema.model import TableSchema
from lakeflow.schema.types import SchemaError

if TYPE_CHECKING:
    from lakeflow.settings.core import TableSchemaSettings


def declared_schema(settings: TableSchemaSettings) -> TableSchema:
    """The table schema the settings declare: TABLE_SCHEMA's file (or the default), with
    EVENT_TIME_FIELD, KEY_FIELDS and PARTITION_BY over the file's choices."""
    return load_schema(
        settings.table_schema,
        event_time=settings.event_time_field,
        key=settings.key_fields,
        partition_by=settings.partition_by,
    )


__all__ = ["SchemaError", "TableSchema", "declared_schema", "load_schema"]
