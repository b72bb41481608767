"""A dataset's columns, as OpenLineage's ``schema`` dataset facet gives them: each field's name, type
(as its producer spells it: an Iceberg type from the compaction, ``long``, ``decimal(9,2)``,
``struct<lat: double>``; a Flink SQL type from lakeflow's listener, ``BIGINT``, ``ROW<…>``), description
and nested fields — a struct's fields, a list's element ``_element``, a map's ``key`` and ``value`` (the
facet's convention).

Read from stored events as plain JSON (:func:`from_facet`), without the OpenLineage library: the
harvest must start fast.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

log = logging.getLogger(__name__)

ELEMENT, KEY, VALUE = "_element", "key", "value"  # a list's and a map's nested fields
STRUCTS, LISTS, MAPS = frozenset({"struct", "row", "record"}), frozenset({"list", "array"}), frozenset({"map"})
_HEAD = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)")


@dataclass(frozen=True, order=True)
class Column:
    """One field of a dataset's schema."""

    name: str
    type: str = ""
    description: str = ""
    fields: tuple[Column, ...] = ()

    @property
    def kind(self) -> str:
        """The type's first word, lower case: ``long``, ``decimal``, ``struct``, ``bigint``, ``row``…"""
        match = _HEAD.match(self.type)
        return match[1].lower() if match else ""

    @property
    def element(self) -> Column:
        """A list's element (its ``_element`` field, else read from the type: ``list<long>``)."""
        return self._nested(ELEMENT, 0)

    @property
    def value(self) -> Column:
        """A map's value (its ``value`` field, else read from the type: ``map<string, long>``)."""
        return self._nested(VALUE, 1)

    @property
    def key(self) -> Column:
        """A map's key (its ``key`` field, else read from the type)."""
        return self._nested(KEY, 0)

    @property
    def members(self) -> tuple[Column, ...]:
        """The struct fields under this column: its own (a struct), its element's (a list) or its
        value's (a map), as DataHub's and the page's paths go on from the column's name."""
        if self.kind in LISTS:
            return self.element.members
        if self.kind in MAPS:
            return self.value.members
        return self.fields if self.kind in STRUCTS else ()

    def _nested(self, name: str, position: int) -> Column:
        found = next((f for f in self.fields if f.name == name), None)
        if found is not None:
            return found
        args = type_arguments(self.type)
        return Column(name, args[position] if position < len(args) else "")

    def facet(self) -> dict[str, Any]:
        """The column as the facet's JSON writes it (no empty keys)."""
        out: dict[str, Any] = {"name": self.name}
        if self.type:
            out["type"] = self.type
        if self.description:
            out["description"] = self.description
        if self.fields:
            out["fields"] = [f.facet() for f in self.fields]
        return out


def type_arguments(spelled: str) -> list[str]:
    """The types between a type's outermost ``<`` and ``>``, split at the top-level commas:
    ``map<string, list<long>>`` → ``["string", "list<long>"]``."""
    start, end = spelled.find("<"), spelled.rfind(">")
    if start < 0 or end < start:
        return []
    out: list[str] = []
    part: list[str] = []
    depth = 0
    for ch in spelled[start + 1 : end]:
        depth += {"<": 1, "(": 1, ">": -1, ")": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            out.append("".join(part).strip())
            part = []
        else:
            part.append(ch)
    out.append("".join(part).strip())
    return [p for p in out if p]


def flat(columns: Sequence[Column], prefix: str = "") -> Iterator[tuple[str, Column]]:
    """Every column with its dotted path (``gps.lat``; a list's or map's struct fields below the
    column's name: ``samples.x``), depth first."""
    for c in columns:
        path = f"{prefix}{c.name}"
        yield path, c
        yield from flat(c.members, f"{path}.")


class _Field(BaseModel):
    """One field of the ``schema`` facet (what lakeflow reads of it)."""

    model_config = ConfigDict(extra="ignore", frozen=True)
    name: str
    type: str | None = None
    description: str | None = None
    fields: list[_Field] | None = None

    def column(self) -> Column:
        return Column(self.name, self.type or "", self.description or "", tuple(f.column() for f in self.fields or ()))


class _Facet(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)
    fields: list[_Field] = []


def from_facet(facet: Mapping[str, Any] | None) -> tuple[Column, ...]:
    """The columns of a ``schema`` facet's JSON; none when it is missing or malformed (logged)."""
    if not facet:
        return ()
    try:
        return tuple(f.column() for f in _Facet.model_validate(facet).fields)
    except ValidationError as exc:
        log.warning("lineage store: a schema facet left out: %s", exc.errors()[0]["msg"])
        return ()
