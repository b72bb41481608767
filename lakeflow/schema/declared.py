"""A declared schema file (JSON Schema, draft 2020-12) → :class:`~lakeflow.schema.model.TableSchema`.

The mapping, unannotated: each property a column of the same name; ``integer`` → long, ``number`` →
double, ``string`` → string (``format: date-time`` → timestamptz, ``format: date`` → date),
``boolean`` → boolean, an ``object`` with ``properties`` → struct, an ``object`` with only
``additionalProperties`` (a schema) → map<string, …>, an ``array`` with ``items`` → list. ``required``
makes a field required; ``"type": [T, "null"]`` lets it be null. Local ``$ref`` (``#/$defs/…``) are
followed. ``maxLength`` and ``maxItems`` are enforced; other validation keywords (``enum``, ``minimum``…)
are not: the table cares for types.

Annotations (JSON Schema keeps unknown keywords as annotations):

- ``x-iceberg-type`` on a field: the Iceberg type JSON Schema cannot say — ``int`` (an integer in 32
  bits), ``float``, ``decimal(P,S)`` (a number, or a numeric string), ``timestamp`` (a date-time
  string without offset);
- ``x-renamed-from`` on a field: the name the table knows it by (a rename keeps the column's id);
- ``x-lakeflow-generate`` on a field: how the synthetic sensors make it (docs/schema.md);
- ``x-lakeflow`` at the top: ``event-time`` (a required top-level integer in epoch milliseconds, or a
  date-time string), ``event-time-column`` (the derived timestamp column of an epoch event time,
  default ``ts``), ``key`` (fields identifying a record; none: every record is kept), ``partition-by``
  (``day``, ``hour``, ``month``, ``year`` of the event time; ``identity(F)``, ``bucket[N](F)``;
  default ``day``), ``sort-by`` (default: the event time, then the key), ``drop`` (table columns to
  drop at the next compaction).

EVENT_TIME_FIELD, KEY_FIELDS and PARTITION_BY override the file's ``x-lakeflow`` choices.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from pyiceberg.types import (
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    IcebergType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
    TimestamptzType,
)

from lakeflow.schema.model import FieldRules, TableSchema, check_layout, parse_partitioning
from lakeflow.schema.types import SchemaError, parse_type, spelled

DEFAULT_FILE = "sensor-reading.schema.json"
DEFAULT_TIME_COLUMN = "ts"
LAKEFLOW = "x-lakeflow"
TABLE_KEYS = frozenset({"event-time", "event-time-column", "key", "partition-by", "sort-by", "drop"})
# x-iceberg-type annotations each JSON type may carry
ANNOTATABLE = {
    "integer": ("int", "long"),
    "number": ("float", "double", "decimal"),
    "string": ("string", "decimal", "date", "timestamp", "timestamptz"),
}


def default_schema_text() -> str:
    """The packaged default: today's sensor reading."""
    return resources.files("lakeflow.schema").joinpath(DEFAULT_FILE).read_text()


def load_schema(
    path: Path | None = None,
    *,
    event_time: str | None = None,
    key: Sequence[str] | None = None,
    partition_by: str | None = None,
) -> TableSchema:
    """The table schema declared in ``path`` (None: lakeflow's default sensor reading), the file's
    layout choices overridden by the arguments given (``key=()``: no key). SchemaError names the file
    and the field for anything unusable."""
    source = str(path) if path is not None else f"lakeflow's default ({DEFAULT_FILE})"
    try:
        text = path.read_text() if path is not None else default_schema_text()
    except OSError as exc:
        raise SchemaError(f"TABLE_SCHEMA={path}: cannot read it: {exc.strerror or exc}") from None
    try:
        return _parsed(text, source, event_time, None if key is None else tuple(key), partition_by)
    except SchemaError as exc:
        raise SchemaError(f"{source}: {exc}") from None


@functools.lru_cache(maxsize=256)
def _parsed(
    text: str, source: str, event_time: str | None, key: tuple[str, ...] | None, partition_by: str | None
) -> TableSchema:
    """:func:`parse_schema`, once per declaration: a compaction service runs every stream of a pipeline
    each pass, and checking a schema against the JSON Schema meta-schema costs milliseconds (a
    ``TableSchema`` is immutable; a changed file is a new text, parsed anew)."""
    return parse_schema(text, source, event_time=event_time, key=key, partition_by=partition_by)


def parse_schema(
    text: str,
    source: str = "",
    *,
    event_time: str | None = None,
    key: Sequence[str] | None = None,
    partition_by: str | None = None,
) -> TableSchema:
    """The table schema of a JSON Schema document's text (see the module docstring)."""
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise SchemaError(f"not JSON: {exc}") from None
    if not isinstance(document, dict):
        raise SchemaError("expected a JSON Schema object at the top")
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError as Malformed

    try:
        Draft202012Validator.check_schema(document)
    except Malformed as exc:
        where = ".".join(str(p) for p in exc.path) or "the top"
        raise SchemaError(f"not a valid JSON Schema (draft 2020-12) at {where}: {exc.message}") from None
    reader = _Reader(document)
    fields, required = reader.object_fields(document, "")
    if document.get("type") not in ("object", None) or not fields:
        raise SchemaError("expected an object schema with properties at the top (the records' fields)")
    table = document.get(LAKEFLOW, {})
    if not isinstance(table, dict) or set(table) - TABLE_KEYS:
        raise SchemaError(f"{LAKEFLOW}: expected an object with some of {', '.join(sorted(TABLE_KEYS))}")
    struct = StructType(*fields)
    chosen_time = event_time or table.get("event-time") or _only_time(struct)
    time_field = next((f for f in fields if f.name == chosen_time), None)
    derived = time_field is not None and time_field.field_type == LongType()
    time_column = str(table.get("event-time-column", DEFAULT_TIME_COLUMN)) if derived else chosen_time
    if derived and any(f.name == time_column for f in fields):
        raise SchemaError(
            f"event time {chosen_time}: its derived timestamp column {time_column!r} is a declared field's name; "
            f'name the column otherwise ("{LAKEFLOW}": {{"event-time-column": "…"}})'
        )
    chosen_key = tuple(key) if key is not None else tuple(table.get("key", ()))
    try:
        terms = parse_partitioning(partition_by or table.get("partition-by", ["day"]), time_column)
    except ValueError as exc:
        raise SchemaError(str(exc)) from None
    sort_by = tuple(table.get("sort-by", (time_column, *chosen_key)))
    schema = TableSchema(
        fields=_ids(struct),
        event_time=chosen_time,
        event_time_column=time_column,
        key=chosen_key,
        partition_by=terms,
        sort_by=tuple(dict.fromkeys(sort_by)),
        rules=reader.rules,
        drop=frozenset(table.get("drop", ())),
        title=str(document.get("title", "")),
        source=source,
        text=text,
    )
    check_layout(schema)
    return schema


def _only_time(struct: StructType) -> str:
    """The event time when the file names none: its one required top-level date-time field."""
    candidates = [f.name for f in struct.fields if f.required and isinstance(f.field_type, TimestamptzType)]
    if len(candidates) == 1:
        return candidates[0]
    raise SchemaError(
        "no event time: name it in x-lakeflow.event-time or EVENT_TIME_FIELD (a required top-level integer in "
        "epoch milliseconds or date-time string)" + (f"; candidates: {', '.join(candidates)}" if candidates else "")
    )


def _ids(struct: StructType) -> StructType:
    """``struct`` with ids as a new table assigns them (level order)."""
    from pyiceberg.schema import Schema, assign_fresh_schema_ids

    return assign_fresh_schema_ids(Schema(*struct.fields)).as_struct()


class _Reader:
    """Walks the document's properties into Iceberg fields, collecting each field's rules."""

    def __init__(self, document: Mapping[str, Any]) -> None:
        self.document = document
        self.rules: dict[str, FieldRules] = {}
        self._next_id = 1  # placeholder ids, unique; replaced by _ids

    def _id(self) -> int:
        self._next_id += 1
        return self._next_id

    def resolve(self, node: Any, path: str) -> dict[str, Any]:
        seen = 0
        while isinstance(node, dict) and "$ref" in node:
            ref = node["$ref"]
            if not isinstance(ref, str) or not ref.startswith("#/"):
                raise SchemaError(f"{path}: only local references (#/$defs/…) are followed, not {ref!r}")
            target: Any = self.document
            for part in ref[2:].split("/"):
                part = part.replace("~1", "/").replace("~0", "~")
                if not isinstance(target, dict) or part not in target:
                    raise SchemaError(f"{path}: reference {ref} names nothing")
                target = target[part]
            node, seen = target, seen + 1
            if seen > 32:
                raise SchemaError(f"{path}: reference {ref} loops")
        if not isinstance(node, dict):
            raise SchemaError(f"{path}: expected a schema object, got {json.dumps(node)}")
        return node

    def object_fields(self, node: Mapping[str, Any], prefix: str) -> tuple[list[NestedField], set[str]]:
        properties = node.get("properties", {})
        required = set(node.get("required", ()))
        unknown = required - set(properties)
        if unknown:
            raise SchemaError(f"{prefix or 'the top'}: required names fields it does not declare: {sorted(unknown)}")
        fields = []
        for name, sub in properties.items():
            path = f"{prefix}{name}"
            t, nullable, rules = self.type_of(sub, path)
            if rules != FieldRules():
                self.rules[path] = rules
            schema = self.resolve(sub, path)
            fields.append(
                NestedField(
                    self._id(),
                    name,
                    t,
                    required=name in required and not nullable,
                    doc=schema.get("description") or None,
                )
            )
        return fields, required

    def type_of(self, node: Any, path: str) -> tuple[IcebergType, bool, FieldRules]:
        """The field's type, whether null is allowed, and its rules."""
        schema = self.resolve(node, path)
        for keyword in ("oneOf", "anyOf", "allOf", "not", "if", "prefixItems", "patternProperties"):
            if keyword in schema:
                raise SchemaError(f"{path}: {keyword} is not supported (a column has one type)")
        declared = schema.get("type")
        types = declared if isinstance(declared, list) else [declared]
        nullable = "null" in types
        types = [t for t in types if t != "null"]
        if len(types) != 1 or types[0] is None:
            raise SchemaError(f'{path}: expected one type (or [type, "null"]), got {json.dumps(declared)}')
        json_type = types[0]
        rules = FieldRules(
            max_length=schema.get("maxLength"),
            max_items=schema.get("maxItems"),
            renamed_from=schema.get("x-renamed-from"),
            generate=schema.get("x-lakeflow-generate"),
        )
        annotation = schema.get("x-iceberg-type")
        if json_type in ("object", "array"):
            if annotation is not None:
                raise SchemaError(f"{path}: x-iceberg-type applies to integer, number and string fields")
            return (
                (self.object_type(schema, path) if json_type == "object" else self.array_type(schema, path)),
                nullable,
                rules,
            )
        return self.primitive(json_type, schema.get("format"), annotation, path), nullable, rules

    def primitive(self, json_type: str, fmt: Any, annotation: Any, path: str) -> IcebergType:
        plain: dict[str, IcebergType] = {"integer": LongType(), "number": DoubleType(), "boolean": BooleanType()}
        if annotation is None:
            if json_type == "string":
                return {"date-time": TimestamptzType(), "date": DateType()}.get(fmt, StringType())
            return plain[json_type]
        try:
            t = parse_type(str(annotation))
        except ValueError as exc:
            raise SchemaError(f"{path}: {exc}") from None
        allowed = ANNOTATABLE.get(json_type, ())
        name = "decimal" if isinstance(t, DecimalType) else spelled(t)
        if name not in allowed:
            raise SchemaError(
                f"{path}: x-iceberg-type {annotation} does not fit a JSON {json_type}"
                + (f" (expected one of {', '.join(allowed)})" if allowed else "")
            )
        return t

    def object_type(self, schema: Mapping[str, Any], path: str) -> IcebergType:
        values = schema.get("additionalProperties")
        if "properties" in schema:
            fields, _ = self.object_fields(schema, f"{path}.")
            if not fields:
                raise SchemaError(f"{path}: an object with no properties")
            return StructType(*fields)
        if isinstance(values, dict):
            t, nullable, rules = self.type_of(values, f"{path}{{}}")
            if rules != FieldRules():
                self.rules[f"{path}{{}}"] = rules
            return MapType(self._id(), StringType(), self._id(), t, value_required=not nullable)
        raise SchemaError(f"{path}: an object needs properties (a struct) or an additionalProperties schema (a map)")

    def array_type(self, schema: Mapping[str, Any], path: str) -> IcebergType:
        items = schema.get("items")
        if not isinstance(items, dict):
            raise SchemaError(f"{path}: an array needs an items schema")
        t, nullable, rules = self.type_of(items, f"{path}[]")
        if rules != FieldRules():
            self.rules[f"{path}[]"] = rules
        return ListType(self._id(), t, element_required=not nullable)
