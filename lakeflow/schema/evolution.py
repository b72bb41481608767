"""Schema evolution, planned before applied: the declared schema against the table's, change by change.

:func:`plan` is pure: each difference becomes a :class:`Change` that is

- **apply** — the table changes (in the commit that writes the next data): a new field, at any depth
  (inside list and map structs too), always optional; one of the spec's promotions (int → long,
  float → double, decimal(P,S) → decimal(P',S) with P' > P); a rename the schema declares
  (``x-renamed-from``: the column keeps its id); a drop the schema asks for (``x-lakeflow.drop``); a
  required column made optional; a new key;
- **convert** — the table stays, records are converted as they are written: a declared type narrower
  than the column's (long column, int declared: written as long); a column the schema no longer
  declares (kept; new rows hold null, as in Iceberg's Kafka Connect sink);
- **refuse** — nothing is applied and the run stops (exit code 2, no raw file touched): any other type
  change (int → string, long → int over a long column, double → decimal, struct ↔ list…), a changed
  decimal scale, a map key that is not a string, dropping the event time, a key or a partition source,
  a new event time or partitioning.

The rules are the Iceberg spec's promotions (pyiceberg's own check is looser: string ↔ binary, a
decimal's scale compared with itself), with the refusals of Redpanda's ``compatibility.cc`` and Flink's
dynamic Iceberg sink (``CompareSchemasVisitor``); docs/schema.md sets them beside each other.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from pyiceberg.schema import Schema
from pyiceberg.types import (
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
)

from lakeflow.schema.model import TableSchema, optional
from lakeflow.schema.types import spelled

if TYPE_CHECKING:
    from pyiceberg.partitioning import PartitionSpec
    from pyiceberg.table.update.schema import UpdateSchema

Action = Literal["apply", "convert", "refuse"]
Path = tuple[str, ...]  # pyiceberg's: a list's element is "element", a map's value "value"


@dataclass(frozen=True)
class Change:
    """One difference between the table and the declaration, and what becomes of it."""

    action: Action
    field: str  # dotted, as people write it: gps.lat, samples[].x, tags{}.y
    change: str  # what differs
    reason: str  # why it is applied, converted or refused
    op: tuple[object, ...] = ()  # for apply: the UpdateSchema call (see :func:`evolve`)

    def __str__(self) -> str:
        return f"{self.action:8} {self.field}: {self.change} ({self.reason})"


def promotable(old: IcebergType, new: IcebergType) -> bool:
    """The spec's type promotions (format v2): int → long, float → double, decimal precision widened."""
    if isinstance(old, IntegerType):
        return isinstance(new, LongType)
    if isinstance(old, FloatType):
        return isinstance(new, DoubleType)
    if isinstance(old, DecimalType) and isinstance(new, DecimalType):
        return new.scale == old.scale and new.precision > old.precision
    return False


@dataclass(frozen=True)
class TableLayout:
    """What a table was made for beyond its schema: its event time, key and partition spec."""

    event_time: str
    key: tuple[str, ...]
    spec: PartitionSpec


def plan(table: Schema, layout: TableLayout, declared: TableSchema) -> list[Change]:
    """Every difference between ``table`` (its schema and layout) and ``declared``, classified."""
    protected = _protected(table, layout)
    wanted = optional(declared.iceberg_schema().as_struct())
    changes = list(_struct(table.as_struct(), wanted, (), "", declared, protected))
    if declared.event_time != layout.event_time:
        changes.append(
            Change(
                "refuse",
                declared.event_time,
                f"event time {layout.event_time} → {declared.event_time}",
                "the table's partitions and files are cut by its event time",
            )
        )
    if declared.key != layout.key and declared.event_time == layout.event_time:
        changes.append(
            Change(
                "apply",
                ", ".join(declared.key) or "(none)",
                f"key ({', '.join(layout.key)}) → ({', '.join(declared.key)})",
                "records are de-duplicated on the new key from the next run on",
                ("key", declared.key),
            )
        )
    old_terms = _terms(layout.spec, table)
    new_terms = [(str(t.iceberg_transform()), t.source) for t in declared.partition_by]
    if old_terms != new_terms:
        changes.append(
            Change(
                "refuse",
                "partitioning",
                f"{_show(old_terms)} → {_show(new_terms)}",
                "lakeflow does not evolve a partition spec: compact into a new table (COMPACT_TABLE)",
            )
        )
    return changes


def _terms(spec: PartitionSpec, schema: Schema) -> list[tuple[str, str]]:
    return [(str(f.transform), schema.find_column_name(f.source_id) or str(f.source_id)) for f in spec.fields]


def _show(terms: Sequence[tuple[str, str]]) -> str:
    return ", ".join(f"{t}({s})" for t, s in terms) or "unpartitioned"


def _protected(table: Schema, layout: TableLayout) -> dict[int, str]:
    """Columns that may not be dropped: field id → what they are."""
    out = {}
    for name in (layout.event_time, *layout.key):
        f = table.find_field(name, case_sensitive=True) if name in table.column_names else None
        if f is not None:
            out[f.field_id] = "the event time" if name == layout.event_time else "a key field"
    for p in layout.spec.fields:
        out.setdefault(p.source_id, "a partition source")
    return out


def _struct(
    table: StructType, wanted: StructType, path: Path, prefix: str, declared: TableSchema, protected: dict[int, str]
) -> Iterator[Change]:
    by_name = {f.name: f for f in table.fields}
    matched: set[int] = set()
    for w in wanted.fields:
        shown = f"{prefix}{w.name}"
        rules = declared.rules.get(shown)
        old = by_name.get(w.name)
        if old is None and rules is not None and rules.renamed_from in by_name:
            old = by_name[rules.renamed_from]
            yield Change(
                "apply",
                shown,
                f"rename {prefix}{old.name} → {w.name}",
                "declared by x-renamed-from (the column keeps its id)",
                ("rename", (*path, old.name), w.name),
            )
        if old is None:
            yield Change(
                "apply",
                shown,
                f"add {spelled(w.field_type)}",
                "a new field is added as an optional column",
                ("add", (*path, w.name), w.field_type, w.doc),
            )
            continue
        matched.add(old.field_id)
        if old.required:
            yield Change(
                "apply",
                shown,
                "required → optional",
                "the record contract requires fields, columns are optional",
                ("optional", (*path, old.name)),
            )
        yield from _type(old.field_type, w.field_type, (*path, old.name), shown, declared, protected)
    for old in table.fields:
        if old.field_id in matched:
            continue
        shown = f"{prefix}{old.name}"
        if shown in declared.drop:
            what = protected.get(old.field_id)
            if what is not None:
                yield Change("refuse", shown, "drop", f"it is {what}")
            else:
                yield Change(
                    "apply",
                    shown,
                    "drop",
                    "asked for by x-lakeflow.drop (old snapshots keep its data)",
                    ("drop", (*path, old.name)),
                )
        else:
            yield Change(
                "convert",
                shown,
                "no longer declared",
                "the column stays; new rows hold null (drop it with x-lakeflow.drop)",
            )


def _type(
    old: IcebergType, new: IcebergType, path: Path, shown: str, declared: TableSchema, protected: dict[int, str]
) -> Iterator[Change]:
    if isinstance(old, StructType) and isinstance(new, StructType):
        yield from _struct(old, new, path, f"{shown}.", declared, protected)
    elif isinstance(old, ListType) and isinstance(new, ListType):
        yield from _type(old.element_type, new.element_type, (*path, "element"), f"{shown}[]", declared, protected)
    elif isinstance(old, MapType) and isinstance(new, MapType):
        if old.key_type != new.key_type or not isinstance(new.key_type, StringType):
            yield Change(
                "refuse",
                shown,
                f"map key {spelled(old.key_type)} → {spelled(new.key_type)}",
                "a map's keys do not change",
            )
        else:
            yield from _type(old.value_type, new.value_type, (*path, "value"), f"{shown}{{}}", declared, protected)
    elif isinstance(old, PrimitiveType) and isinstance(new, PrimitiveType):
        if old == new:
            return
        change = f"{spelled(old)} → {spelled(new)}"
        if promotable(old, new):
            yield Change("apply", shown, change, "a promotion the Iceberg spec allows", ("promote", path, new))
        elif promotable(new, old):
            yield Change("convert", shown, change, f"values fit the {spelled(old)} column and are written as such")
        else:
            yield Change("refuse", shown, change, _why_not(old, new))
    else:
        yield Change("refuse", shown, f"{spelled(old)} → {spelled(new)}", "a column's kind does not change")


def _why_not(old: PrimitiveType, new: PrimitiveType) -> str:
    if isinstance(old, DecimalType) and isinstance(new, DecimalType):
        if old.scale != new.scale:
            return "a decimal's scale does not change"
        return "a decimal column does not narrow"
    return "not a promotion the Iceberg spec allows (int → long, float → double, decimal(P,S) → decimal(P',S), P' > P)"


def refused(changes: Sequence[Change]) -> list[Change]:
    return [c for c in changes if c.action == "refuse"]


def evolve(update: UpdateSchema, changes: Sequence[Change]) -> None:
    """Stage the applied changes' schema updates on ``update`` (renames first, then the rest, in order)."""
    ordered = sorted((c for c in changes if c.action == "apply" and c.op), key=lambda c: c.op[0] != "rename")
    for c in ordered:
        op, args = c.op[0], c.op[1:]
        if op == "rename":
            path, name = args
            update.rename_column(path, name)  # type: ignore[arg-type]
        elif op == "add":
            path, field_type, doc = args
            update.add_column(path, field_type, doc=doc, required=False)  # type: ignore[arg-type]
        elif op == "promote":
            path, field_type = args
            update.update_column(path, field_type=field_type)  # type: ignore[arg-type]
        elif op == "optional":
            (path,) = args
            update.make_column_optional(path)  # type: ignore[arg-type]
        elif op == "drop":
            (path,) = args
            update.delete_column(path)  # type: ignore[arg-type]
