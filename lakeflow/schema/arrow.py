"""The declared schema as Arrow types: what a parsed record holds, what pyarrow's JSON reader is asked
for, and a table conformed to an Iceberg table's Arrow schema (by name, recursively)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
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
    StringType,
    StructType,
    TimestampType,
    TimestamptzType,
)

TIMESTAMPTZ = pa.timestamp("us", tz="UTC")
_PRIMITIVES: list[tuple[type[IcebergType], pa.DataType]] = [
    (StringType, pa.string()),
    (LongType, pa.int64()),
    (IntegerType, pa.int32()),
    (DoubleType, pa.float64()),
    (FloatType, pa.float32()),
    (BooleanType, pa.bool_()),
    (DateType, pa.date32()),
    (TimestamptzType, TIMESTAMPTZ),
    (TimestampType, pa.timestamp("us")),
]


def record_type(t: IcebergType) -> pa.DataType:
    """The Arrow type of a field's values as the compaction holds them (every child nullable)."""
    if isinstance(t, StructType):
        return pa.struct([pa.field(f.name, record_type(f.field_type)) for f in t.fields])
    if isinstance(t, ListType):
        return pa.list_(record_type(t.element_type))
    if isinstance(t, MapType):
        return pa.map_(pa.string(), record_type(t.value_type))
    if isinstance(t, DecimalType):
        return pa.decimal128(t.precision, t.scale)
    for kind, arrow in _PRIMITIVES:
        if isinstance(t, kind):
            return arrow
    raise TypeError(f"no Arrow type for {t}")


def record_schema(fields: StructType) -> pa.Schema:
    return pa.schema([pa.field(f.name, record_type(f.field_type)) for f in fields.fields])


def reader_type(t: IcebergType) -> pa.DataType | None:
    """What pyarrow's JSON reader is asked to parse a field as: dates and timestamps as strings (their
    format is checked, then they are cast), the rest as held; None when it cannot (a map)."""
    if isinstance(t, (DateType, TimestampType, TimestamptzType)):
        return pa.string()
    if isinstance(t, StructType):
        children = [reader_type(f.field_type) for f in t.fields]
        if any(c is None for c in children):
            return None
        return pa.struct([pa.field(f.name, c) for f, c in zip(t.fields, children, strict=True)])
    if isinstance(t, ListType):
        item = reader_type(t.element_type)
        return None if item is None else pa.list_(item)
    if isinstance(t, MapType):
        return None
    return record_type(t)


def reader_schema(fields: StructType) -> pa.Schema | None:
    """The JSON reader's explicit schema for the declared fields but the top-level maps (which it infers as
    structs of the keys it meets); None if the fields cannot be read so (a map below the top level)."""
    declared = [f for f in fields.fields if not isinstance(f.field_type, MapType)]
    types = [reader_type(f.field_type) for f in declared]
    if any(t is None for t in types):
        return None
    return pa.schema([pa.field(f.name, t) for f, t in zip(declared, types, strict=True)])


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` with exactly ``schema``'s columns (field metadata included), matched by name at every
    depth: a column or child the table lacks is null, one ``schema`` lacks is left out, and values are
    cast to the target type (only widening casts occur: int → long, float → double, decimal(P,S) → (P',S),
    string → large_string)."""
    columns = []
    for f in schema:
        if f.name in table.column_names:
            column = table.column(f.name)
            columns.append(pa.chunked_array([_array(c, f.type) for c in column.chunks], type=f.type))
        else:
            columns.append(pa.nulls(table.num_rows, f.type))
    return pa.Table.from_arrays(columns, schema=schema)


def _array(a: pa.Array, target: pa.DataType) -> pa.Array:
    if a.type == target:
        return a
    if a.offset:  # a slice: its nested offsets do not start at 0, which from_arrays with a mask refuses
        a = pa.concat_arrays([a])
    if pa.types.is_struct(target):
        children = []
        names = {a.type.field(i).name: i for i in range(a.type.num_fields)} if pa.types.is_struct(a.type) else {}
        for child in target:
            if child.name in names:
                children.append(_array(a.field(names[child.name]), child.type))
            else:
                children.append(pa.nulls(len(a), child.type))
        return pa.StructArray.from_arrays(children, fields=list(target), mask=a.is_null())
    if pa.types.is_map(target):
        keys = pc.cast(a.keys, target.key_type)
        items = _array(a.items, target.item_type)
        return pa.MapArray.from_arrays(a.offsets, keys, items, type=target, mask=a.is_null())
    if pa.types.is_list(target) or pa.types.is_large_list(target):
        values = _array(a.values, target.value_type)
        kind = pa.LargeListArray if pa.types.is_large_list(target) else pa.ListArray
        offsets = pc.cast(a.offsets, pa.int64() if kind is pa.LargeListArray else pa.int32())
        return kind.from_arrays(offsets, values, type=target, mask=a.is_null())
    return pc.cast(a, target)
