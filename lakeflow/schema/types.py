"""The column types a declared schema may use, and how each is spelled: in JSON Schema annotations
(``x-iceberg-type``), in the record contract (``kind``) and for people.

The types are pyiceberg's (:mod:`pyiceberg.types`); lakeflow's tables are Iceberg format v2, so the
nanosecond timestamps (v3) are not among them.
"""

from __future__ import annotations

import re

from pyiceberg.types import (
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IcebergType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    PrimitiveType,
    StringType,
    StructType,
    TimestampType,
    TimestamptzType,
)

from lakeflow.errors import ConfigurationError

_DECIMAL = re.compile(r"decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)")
MAX_DECIMAL_PRECISION = 38  # Iceberg's (and a Parquet/Arrow decimal128's) largest

# x-iceberg-type names → the type, for the primitives whose name says it all
NAMED: dict[str, PrimitiveType] = {
    "int": IntegerType(),
    "long": LongType(),
    "float": FloatType(),
    "double": DoubleType(),
    "string": StringType(),
    "boolean": BooleanType(),
    "date": DateType(),
    "timestamp": TimestampType(),
    "timestamptz": TimestamptzType(),
}


class SchemaError(ConfigurationError, ValueError):
    """The declared schema is unusable; the message names the file and the field."""


def parse_type(name: str) -> PrimitiveType:
    """The primitive type an ``x-iceberg-type`` annotation names (``long``, ``decimal(9,2)``…)."""
    text = name.strip().lower()
    if text in NAMED:
        return NAMED[text]
    match = _DECIMAL.fullmatch(text)
    if match:
        precision, scale = int(match[1]), int(match[2])
        if not 1 <= precision <= MAX_DECIMAL_PRECISION or scale > precision:
            raise ValueError(f"{name}: a decimal needs 1 <= P <= {MAX_DECIMAL_PRECISION} and S <= P")
        return DecimalType(precision, scale)
    raise ValueError(f"unknown x-iceberg-type {name!r}: expected one of {', '.join(NAMED)} or decimal(P,S)")


def kind(t: IcebergType) -> str:
    """The record contract's name of ``t`` (``long``, ``decimal``, ``struct``…)."""
    if isinstance(t, DecimalType):
        return "decimal"
    if isinstance(t, StructType):
        return "struct"
    if isinstance(t, ListType):
        return "list"
    if isinstance(t, MapType):
        return "map"
    for name, named in NAMED.items():
        if t == named:
            return name
    raise ValueError(f"type {t} is not one lakeflow tables use")


def spelled(t: IcebergType) -> str:
    """``t`` for people: ``long``, ``decimal(9,2)``, ``struct<lat: double>``, ``list<double>``; a type no
    declaration gives (a column another writer added: ``binary``, ``uuid``…) by pyiceberg's name."""
    if isinstance(t, StructType):
        return "struct<" + ", ".join(f"{f.name}: {spelled(f.field_type)}" for f in t.fields) + ">"
    if isinstance(t, ListType):
        return f"list<{spelled(t.element_type)}>"
    if isinstance(t, MapType):
        return f"map<{spelled(t.key_type)}, {spelled(t.value_type)}>"
    if isinstance(t, DecimalType):
        return f"decimal({t.precision},{t.scale})"
    return next((name for name, named in NAMED.items() if t == named), str(t))


def is_time(t: IcebergType) -> bool:
    """A timestamp column (with or without zone): what an event time's partitions are cut from."""
    return isinstance(t, (TimestampType, TimestamptzType))
