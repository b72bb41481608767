"""The table's schema: the one object every part of lakeflow takes its fields from.

A :class:`TableSchema` is what the user declared (:mod:`lakeflow.schema.declared` reads it from a JSON
Schema file): the records' fields as an Iceberg schema, the event time, the key, the partitioning and
the per-field rules JSON Schema adds (lengths, renames, the synthetic generator's hints). From it come
the Iceberg schema and partition spec of a new table, the record contract the ingestion job's validator
and the compaction enforce (:meth:`TableSchema.contract`), and the sort order.

An event time sent as epoch milliseconds (a ``long``) keeps its column, and the table gets a derived
``timestamptz`` column (``event_time_column``) to partition and sort by; an event time sent as an
RFC 3339 string is a ``timestamptz`` column itself.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema, assign_fresh_schema_ids
from pyiceberg.table.sorting import SortField, SortOrder
from pyiceberg.transforms import (
    BucketTransform,
    DayTransform,
    HourTransform,
    IdentityTransform,
    MonthTransform,
    Transform,
    YearTransform,
)
from pyiceberg.types import (
    DecimalType,
    IcebergType,
    ListType,
    LongType,
    MapType,
    NestedField,
    PrimitiveType,
    StructType,
    TimestamptzType,
)

from lakeflow.schema.types import SchemaError, is_time, kind

PARTITION_FIELD_ID = 1000  # Iceberg's first partition field id
TIME_TRANSFORMS: dict[str, type[Transform[Any, Any]]] = {
    "year": YearTransform,
    "month": MonthTransform,
    "day": DayTransform,
    "hour": HourTransform,
}
_TERM = re.compile(r"(?:(identity)\((\w+)\)|bucket\[(\d+)\]\((\w+)\)|(year|month|day|hour))")
EPOCH_MILLIS = "epoch milliseconds"  # how a long event time is read


@dataclass(frozen=True)
class PartitionTerm:
    """One partition field: a time transform of the event time, ``identity`` or ``bucket[N]`` of a column."""

    transform: str  # year | month | day | hour | identity | bucket
    source: str  # the column it is cut from (a top-level one)
    width: int | None = None  # buckets, for bucket

    @property
    def name(self) -> str:
        """The partition field's name (and the data folders' ``name=value``): ``ts_day``, ``location``,
        ``device_id_bucket``."""
        if self.transform == "identity":
            return self.source
        return f"{self.source}_{self.transform}"

    def iceberg_transform(self) -> Transform[Any, Any]:
        if self.transform == "identity":
            return IdentityTransform()
        if self.transform == "bucket":
            assert self.width is not None
            return BucketTransform(self.width)
        return TIME_TRANSFORMS[self.transform]()

    def __str__(self) -> str:
        if self.transform in TIME_TRANSFORMS:
            return self.transform
        if self.transform == "bucket":
            return f"bucket[{self.width}]({self.source})"
        return f"identity({self.source})"


def parse_partitioning(text: str | list[str], time_column: str) -> tuple[PartitionTerm, ...]:
    """``day``, ``hour, identity(location)``, ``bucket[16](device_id)``, ``none``: the terms, in order."""
    items = [t.strip() for t in (text.split(",") if isinstance(text, str) else text) if t.strip()]
    if items == ["none"]:
        return ()
    terms = []
    for item in items:
        match = _TERM.fullmatch(item.replace(" ", ""))
        if match is None:
            raise ValueError(
                f"partition term {item!r}: expected year, month, day or hour (of the event time), "
                "identity(FIELD), bucket[N](FIELD), or none"
            )
        if match[1]:
            terms.append(PartitionTerm("identity", match[2]))
        elif match[3]:
            if int(match[3]) < 1:
                raise ValueError(f"partition term {item!r}: a bucket count must be at least 1")
            terms.append(PartitionTerm("bucket", match[4], int(match[3])))
        else:
            terms.append(PartitionTerm(match[5], time_column))
    if len({t.name for t in terms}) != len(terms):
        raise ValueError(f"partitioning {', '.join(items)}: a term repeats")
    return tuple(terms)


@dataclass(frozen=True)
class FieldRules:
    """What JSON Schema says of a field beyond its type (keyed by its path, see :func:`paths`)."""

    max_length: int | None = None  # a string's characters
    max_items: int | None = None  # a list's elements
    renamed_from: str | None = None  # the name the table knows it by (schema evolution keeps its id)
    generate: Mapping[str, Any] | None = None  # the synthetic generator's hint (x-lakeflow-generate)


@dataclass(frozen=True)
class TableSchema:
    """A table's declared schema and layout; build with :func:`lakeflow.schema.declared.load_schema`."""

    fields: StructType  # the records' declared fields, in order (ids level-ordered, as a new table gets them)
    event_time: str  # a top-level required field: a long (epoch ms) or a timestamp
    event_time_column: str  # the timestamp column partitions and sort order use: event_time, or derived
    key: tuple[str, ...]  # top-level fields identifying a record (empty: every record is kept)
    partition_by: tuple[PartitionTerm, ...]
    sort_by: tuple[str, ...]  # top-level columns within each data file
    rules: Mapping[str, FieldRules] = field(default_factory=dict)
    drop: frozenset[str] = frozenset()  # table columns the user asks to drop (schema evolution)
    title: str = ""
    source: str = ""  # where it was declared (a file, or lakeflow's default)
    text: str = ""  # the declaration as read (its digest tells versions apart)

    @property
    def derived_time(self) -> bool:
        """True when the table derives its timestamp column from an epoch-millisecond event time."""
        return self.event_time_column != self.event_time

    @property
    def names(self) -> tuple[str, ...]:
        """The declared top-level fields, in order."""
        return tuple(f.name for f in self.fields.fields)

    @property
    def columns(self) -> tuple[str, ...]:
        """The table's top-level columns: the declared fields, then the derived timestamp column."""
        return (*self.names, self.event_time_column) if self.derived_time else self.names

    @property
    def digest(self) -> str:
        """A short digest of the declaration (what a run records it compacted under)."""
        return hashlib.sha256(self.text.encode()).hexdigest()[:12]

    def field(self, name: str) -> NestedField:
        return self.fields.field_by_name(name)  # type: ignore[return-value]

    def iceberg_schema(self) -> Schema:
        """The Iceberg schema of a new table: the declared fields (+ the derived timestamp column),
        every one optional (:func:`optional`), field ids assigned as a new table assigns them."""
        fields = list(optional(self.fields).fields)
        if self.derived_time:
            fields.append(
                NestedField(
                    0,
                    self.event_time_column,
                    TimestamptzType(),
                    required=False,
                    doc=f"{self.event_time} ({EPOCH_MILLIS}) as a UTC timestamp",
                )
            )
        schema = Schema(*fields)
        return assign_fresh_schema_ids(schema)

    def partition_spec(self, schema: Schema) -> PartitionSpec:
        """The declared partitioning, bound to ``schema``'s field ids (a table's, or :meth:`iceberg_schema`)."""
        return PartitionSpec(
            *(
                PartitionField(
                    source_id=schema.find_field(t.source).field_id,
                    field_id=PARTITION_FIELD_ID + i,
                    transform=t.iceberg_transform(),
                    name=t.name,
                )
                for i, t in enumerate(self.partition_by)
            )
        )

    def sort_order(self, schema: Schema) -> SortOrder:
        """Within each data file: :attr:`sort_by`, bound to ``schema``'s field ids."""
        return SortOrder(
            *(SortField(source_id=schema.find_field(n).field_id, transform=IdentityTransform()) for n in self.sort_by)
        )

    def contract(self) -> dict[str, Any]:
        """The record contract as JSON (the ingestion job's validator reads it as a job parameter; see
        :mod:`lakeflow.schema.records` for its meaning)."""
        return {"fields": [self._member(f, f.name) for f in self.fields.fields]}

    def contract_json(self) -> str:
        return json.dumps(self.contract(), separators=(",", ":"), sort_keys=True)

    def _member(self, f: NestedField, path: str) -> dict[str, Any]:
        return {"name": f.name, "required": f.required, "type": self._type(f.field_type, path)}

    def _type(self, t: IcebergType, path: str) -> dict[str, Any]:
        rules = self.rules.get(path, FieldRules())
        out: dict[str, Any] = {"kind": kind(t)}
        if isinstance(t, StructType):
            out["fields"] = [self._member(f, f"{path}.{f.name}") for f in t.fields]
        elif isinstance(t, ListType):
            out["items"] = self._type(t.element_type, f"{path}[]")
            out["itemsRequired"] = t.element_required
            if rules.max_items is not None:
                out["maxItems"] = rules.max_items
        elif isinstance(t, MapType):
            out["values"] = self._type(t.value_type, f"{path}{{}}")
            out["valuesRequired"] = t.value_required
        elif isinstance(t, DecimalType):
            out["precision"], out["scale"] = t.precision, t.scale
        elif rules.max_length is not None:
            out["maxLength"] = rules.max_length
        return out


def optional(t: IcebergType) -> Any:
    """``t`` with every field, list element and map value optional: a table's columns are, so that a
    later declaration may stop requiring a field and files written before a column existed read as
    null; the record contract is what requires fields."""
    if isinstance(t, StructType):
        return StructType(
            *(NestedField(f.field_id, f.name, optional(f.field_type), required=False, doc=f.doc) for f in t.fields)
        )
    if isinstance(t, ListType):
        return ListType(t.element_id, optional(t.element_type), element_required=False)
    if isinstance(t, MapType):
        return MapType(t.key_id, t.key_type, t.value_id, optional(t.value_type), value_required=False)
    return t


def paths(t: StructType, prefix: str = "") -> Iterator[tuple[str, NestedField]]:
    """Every field under ``t`` with its path: ``gps.lat``; a list's element struct ``samples[].x``,
    a map's value struct ``tags{}.x``."""
    for f in t.fields:
        path = f"{prefix}{f.name}"
        yield path, f
        yield from _inner(f.field_type, path)


def _inner(t: IcebergType, path: str) -> Iterator[tuple[str, NestedField]]:
    if isinstance(t, StructType):
        yield from paths(t, f"{path}.")
    elif isinstance(t, ListType):
        yield from _inner(t.element_type, f"{path}[]")
    elif isinstance(t, MapType):
        yield from _inner(t.value_type, f"{path}{{}}")


def check_layout(schema: TableSchema) -> None:
    """The event time, key, partition and sort fields exist at the top level with usable types."""
    top = {f.name: f for f in schema.fields.fields}

    def need(name: str, what: str) -> NestedField:
        if name not in top:
            raise SchemaError(f"{what} {name!r} is not a top-level field of the schema (fields: {', '.join(top)})")
        return top[name]

    event = need(schema.event_time, "the event-time field")
    if not (event.field_type == LongType() or is_time(event.field_type)):
        raise SchemaError(
            f"the event-time field {event.name!r} is a {kind(event.field_type)}: expected an integer "
            f"({EPOCH_MILLIS}) or a date-time string"
        )
    if not event.required:
        raise SchemaError(f"the event-time field {event.name!r} must be required (list it under 'required')")
    if schema.derived_time and schema.event_time_column in top:
        raise SchemaError(
            f"the derived timestamp column {schema.event_time_column!r} is also a declared field: "
            "name another (x-lakeflow.event-time-column)"
        )
    for name in schema.key:
        f = need(name, "the key field")
        if not isinstance(f.field_type, PrimitiveType) or kind(f.field_type) in ("float", "double"):
            raise SchemaError(
                f"the key field {name!r} is a {kind(f.field_type)}: expected a string, integer, date, "
                "timestamp, boolean or decimal"
            )
    if len(set(schema.key)) != len(schema.key):
        raise SchemaError(f"the key {', '.join(schema.key)} names a field twice")
    columns = {**top, schema.event_time_column: None}
    for term in schema.partition_by:
        if term.source not in columns:
            raise SchemaError(f"partition term {term} needs the top-level field {term.source!r}")
        source = top.get(term.source)
        if source is not None and not isinstance(source.field_type, PrimitiveType):
            raise SchemaError(f"partition term {term}: {term.source!r} is a {kind(source.field_type)}")
    for name in schema.sort_by:
        if name not in columns:
            raise SchemaError(f"sort field {name!r} is not a top-level column")
