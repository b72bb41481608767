"""The declared schema's types as Flink SQL spells them: the synthetic generator's typed columns and the
sink's native-lineage schema facet. A table's columns are all nullable, so no type says NOT NULL."""

from __future__ import annotations

from pyiceberg.types import DecimalType, IcebergType, ListType, MapType, StructType

from lakeflow.schema import TableSchema
from lakeflow.schema.types import kind

NAMED = {
    "string": "STRING",
    "long": "BIGINT",
    "int": "INT",
    "double": "DOUBLE",
    "float": "FLOAT",
    "boolean": "BOOLEAN",
    "date": "DATE",
    "timestamptz": "TIMESTAMP_LTZ(6)",  # Iceberg's timestamps are microseconds
    "timestamp": "TIMESTAMP(6)",
}


def quoted(name: str) -> str:
    """A field name as a Flink SQL identifier: ```name```."""
    return "`" + name.replace("`", "``") + "`"


def sql_type(t: IcebergType) -> str:
    """``t`` in Flink SQL: ``BIGINT``, ``DECIMAL(9, 2)``, ``ROW<`lat` DOUBLE, `lon` DOUBLE>``,
    ``ARRAY<DOUBLE>``, ``MAP<STRING, STRING>``, ``TIMESTAMP_LTZ(6)``."""
    if isinstance(t, StructType):
        return "ROW<" + ", ".join(f"{quoted(f.name)} {sql_type(f.field_type)}" for f in t.fields) + ">"
    if isinstance(t, ListType):
        return f"ARRAY<{sql_type(t.element_type)}>"
    if isinstance(t, MapType):
        return f"MAP<{sql_type(t.key_type)}, {sql_type(t.value_type)}>"
    if isinstance(t, DecimalType):
        return f"DECIMAL({t.precision}, {t.scale})"
    return NAMED[kind(t)]


def sql_fields(schema: TableSchema) -> list[tuple[str, str]]:
    """The declared top-level fields as ``(name, Flink SQL type)``, in order."""
    return [(f.name, sql_type(f.field_type)) for f in schema.fields.fields]
