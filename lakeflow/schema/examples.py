"""Example records of a declared schema: every field present, each value of its type (what
``lakeflow spark-cds`` compacts to warm a driver up, and what tests feed a schema they declare)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

from lakeflow.schema.model import TableSchema

EPOCH_MS = 1_763_683_200_000  # 2025-11-21T00:00:00Z: the first example's event time


def example(schema: TableSchema, n: int, step_ms: int = 1000) -> dict[str, Any]:
    """Example record ``n``: its event time ``n`` steps after :data:`EPOCH_MS`, the other fields
    following ``n`` (strings take 100 values: a field's cardinality is a device's, not a record's), as
    JSON carries them."""
    return next(examples(schema, n, 1, step_ms))


def examples(schema: TableSchema, start: int, count: int, step_ms: int = 1000) -> Iterator[dict[str, Any]]:
    """Example records ``start`` … ``start + count - 1`` (see :func:`example`)."""
    fields = schema.contract()["fields"]
    for n in range(start, start + count):
        out = {f["name"]: _value(f["type"], n, f["name"]) for f in fields}
        instant = EPOCH_MS + step_ms * n
        out[schema.event_time] = instant if schema.derived_time else _iso(instant)
        yield out


def _iso(ms: int) -> str:
    t = datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(milliseconds=ms)
    return t.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _value(t: dict[str, Any], n: int, name: str) -> Any:
    kind = t["kind"]
    if kind == "string":
        return f"{name}-{n % 100}"[: t.get("maxLength", 64)]
    if kind in ("long", "int"):
        return n
    if kind in ("double", "float"):
        return n + 0.5
    if kind == "boolean":
        return n % 2 == 0
    if kind == "decimal":
        return f"{n % 10 ** (t['precision'] - t['scale'])}.{'5' * t['scale']}" if t["scale"] else str(n)
    if kind == "date":
        return (datetime(2025, 11, 21) + timedelta(days=n % 365)).date().isoformat()
    if kind == "timestamptz":
        return _iso(EPOCH_MS + 1000 * n)
    if kind == "timestamp":
        return _iso(EPOCH_MS + 1000 * n).rstrip("Z")
    if kind == "struct":
        return {f["name"]: _value(f["type"], n, f["name"]) for f in t["fields"]}
    if kind == "list":
        return [_value(t["items"], n + i, name) for i in range(min(2, t.get("maxItems", 2)))]
    if kind == "map":
        return {f"k{i}": _value(t["values"], n + i, name) for i in range(2)}
    raise ValueError(f"no example of {kind}")
