"""The record contract: whether a JSON record fits the declared schema, and why not.

:meth:`TableSchema.contract` writes the contract as JSON; the ingestion job's validator (``Records``,
java/) enforces it on every Kafka message, the compaction on every record of a part file (here: the
exact path; the fast path only ever takes files this would take whole). Both give the same reasons:
tests/contracts/records.json holds the cases both are checked against.

A record fits when every required field is present and not null, and every field present fits its
type. Nothing is coerced: ``"5"`` is no integer and ``5`` no string.

===========  ==========================================================================================
kind         takes
===========  ==========================================================================================
string       a string (``maxLength``: at most that many characters)
long, int    an integer (no fraction, no exponent) in 64 (32) bits
double       any number, finite as a double
float        any number, finite as a float (32 bits)
boolean      true or false
decimal      a number or a numeric string, with at most ``scale`` decimal places and ``precision`` digits
date         a string ``YYYY-MM-DD``, a real day
timestamptz  an RFC 3339 date-time with ``Z`` or an offset (``2026-11-28T10:00:00.123+01:00``)
timestamp    the same without the offset; fractions beyond microseconds are cut
struct       an object (its fields checked as the record's; others ignored)
list         an array (``maxItems``), each element of the element type; null only when ``itemsRequired`` is false
map          an object, each value of the value type; null only when ``valuesRequired`` is false
===========  ==========================================================================================
"""

from __future__ import annotations

import math
import re
import struct
from collections.abc import Callable, Mapping
from datetime import date, datetime, timezone
from decimal import Context, Decimal, InvalidOperation
from typing import Any

from lakeflow.errors import LakeflowError

Check = Callable[[Any, str], Any]  # (value, path) → the value as the table holds it; raises Invalid

# ASCII digits only (\d alone would take any script's)
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}", re.ASCII)
_DATE_TIME = re.compile(r"(\d{4}-\d{2}-\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?([Zz]|[+-]\d{2}:\d{2})?", re.ASCII)
_DECIMAL_TEXT = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?", re.ASCII)
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_RANGE = {"long": 63, "int": 31}
FLOAT_MAX = 3.4028234663852886e38


class Invalid(LakeflowError, ValueError):
    """A value breaks the contract; the message is the reason."""


def got(value: Any) -> str:
    """What a JSON value is, for a reason: ``a string``, ``an integer``, ``an object``…"""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, (float, Decimal)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object" if isinstance(value, dict) else "null"


EXPECTED = {
    "string": "a string",
    "long": "an integer",
    "int": "an integer",
    "double": "a number",
    "float": "a number",
    "boolean": "a boolean",
    "decimal": "a number or a numeric string",
    "date": "a date (YYYY-MM-DD)",
    "timestamptz": "a date-time with offset (RFC 3339)",
    "timestamp": "a date-time without offset",
    "struct": "an object",
    "list": "an array",
    "map": "an object",
}


def _fail(path: str, kind: str, value: Any) -> Invalid:
    return Invalid(f"field {path}: expected {EXPECTED[kind]}, got {got(value)}")


def compile_type(spec: Mapping[str, Any]) -> Check:
    """The check of one contract type (``{"kind": …}``)."""
    kind = spec["kind"]
    if kind == "string":
        limit = spec.get("maxLength")

        def string(v: Any, path: str) -> Any:
            if not isinstance(v, str):
                raise _fail(path, kind, v)
            if limit is not None and len(v) > limit:
                raise Invalid(f"field {path}: longer than {limit} characters")
            return v

        return string
    if kind in _RANGE:
        bits = _RANGE[kind]

        def integer(v: Any, path: str) -> Any:
            if not isinstance(v, int) or isinstance(v, bool):
                raise _fail(path, kind, v)
            if not -(2**bits) <= v < 2**bits:
                raise Invalid(f"field {path}: integer out of range for {'a long' if bits == 63 else 'an int'}")
            return v

        return integer
    if kind in ("double", "float"):

        def number(v: Any, path: str) -> Any:
            if isinstance(v, bool) or not isinstance(v, (int, float, Decimal)):
                raise _fail(path, kind, v)
            try:
                out = float(v)
            except OverflowError:
                out = math.inf
            if not math.isfinite(out) or (kind == "float" and not _fits_float(out)):
                raise Invalid(f"field {path}: number out of range for a {kind}")
            return out

        return number
    if kind == "boolean":

        def boolean(v: Any, path: str) -> Any:
            if not isinstance(v, bool):
                raise _fail(path, kind, v)
            return v

        return boolean
    if kind == "decimal":
        return _decimal(spec["precision"], spec["scale"])
    if kind == "date":

        def day(v: Any, path: str) -> Any:
            if not isinstance(v, str) or not _DATE.fullmatch(v):
                raise _fail(path, kind, v)
            try:
                return date.fromisoformat(v)
            except ValueError:
                raise Invalid(f"field {path}: {v} is no day of the calendar") from None

        return day
    if kind in ("timestamptz", "timestamp"):
        return _timestamp(kind)
    if kind == "struct":
        return _struct(spec["fields"])
    if kind == "list":
        return _list(compile_type(spec["items"]), spec.get("itemsRequired", False), spec.get("maxItems"))
    if kind == "map":
        return _map(compile_type(spec["values"]), spec.get("valuesRequired", False))
    raise ValueError(f"unknown kind {kind!r} in the record contract")


def _fits_float(x: float) -> bool:
    try:
        struct.pack("<f", x)
    except OverflowError:
        return False
    return True


def _decimal(precision: int, scale: int) -> Check:
    quantum = Decimal(1).scaleb(-scale)
    context = Context(prec=precision)  # the default context's 28 digits would round wider decimals

    def decimal(v: Any, path: str) -> Any:
        numeric = isinstance(v, (int, Decimal)) and not isinstance(v, bool)
        if numeric or (isinstance(v, str) and _DECIMAL_TEXT.fullmatch(v)):
            try:
                value = Decimal(v)
            except InvalidOperation:  # an exponent of more than 18 digits
                raise Invalid(f"field {path}: more than {precision} digits for decimal({precision},{scale})") from None
        elif isinstance(v, float):  # a caller that parsed numbers as floats: their shortest text
            value = Decimal(repr(v))
        else:
            raise _fail(path, "decimal", v)
        _, digits, exponent = value.as_tuple()
        exponent = exponent if isinstance(exponent, int) else 0  # (a float's inf or nan: refused below)
        significant = "".join(map(str, digits)).rstrip("0")  # zero has none: it fits every decimal
        exponent += len(digits) - len(significant)
        if significant and -exponent > scale:
            raise Invalid(f"field {path}: more than {scale} decimal places for decimal({precision},{scale})")
        if not value.is_finite() or (significant and len(significant) + exponent > precision - scale):
            raise Invalid(f"field {path}: more than {precision} digits for decimal({precision},{scale})")
        return value.quantize(quantum, context=context)

    return decimal


def _timestamp(kind: str) -> Check:
    zoned = kind == "timestamptz"

    def timestamp(v: Any, path: str) -> Any:
        match = _DATE_TIME.fullmatch(v) if isinstance(v, str) else None
        if match is None or (match[6] is not None) != zoned:
            raise _fail(path, kind, v)
        day_text, hh, mm, ss, fraction, offset = match.groups()
        if offset not in (None, "Z", "z") and (int(offset[1:3]) > 23 or int(offset[4:6]) > 59):
            raise Invalid(f"field {path}: {v} is no instant of the calendar")
        try:
            t = datetime.fromisoformat(f"{day_text}T{hh}:{mm}:{ss}{_offset(offset)}")
        except ValueError:
            raise Invalid(f"field {path}: {v} is no instant of the calendar") from None
        if t.tzinfo is None:
            t = t.replace(tzinfo=timezone.utc)
        seconds = (t - _EPOCH) // _SECOND
        return seconds * 1_000_000 + int((fraction or "")[:6].ljust(6, "0"))

    return timestamp


_SECOND = datetime(1970, 1, 1, 0, 0, 1, tzinfo=timezone.utc) - _EPOCH


def _offset(text: str | None) -> str:
    return "" if text is None else "+00:00" if text in ("Z", "z") else text


def _struct(fields: list[Mapping[str, Any]]) -> Check:
    members = [(f["name"], bool(f["required"]), compile_type(f["type"])) for f in fields]

    def record(v: Any, path: str) -> Any:
        if not isinstance(v, dict):
            raise _fail(path, "struct", v)
        return _members(members, v, f"{path}.")

    return record


def _members(members: list[tuple[str, bool, Check]], v: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, required, check in members:
        value = v.get(name)
        if value is None:
            if required:
                raise Invalid(f"missing field {prefix}{name}")
            out[name] = None
        else:
            out[name] = check(value, f"{prefix}{name}")
    return out


def _list(item: Check, required: bool, limit: int | None) -> Check:
    def array(v: Any, path: str) -> Any:
        if not isinstance(v, list):
            raise _fail(path, "list", v)
        if limit is not None and len(v) > limit:
            raise Invalid(f"field {path}: more than {limit} items")
        out: list[Any] = []
        for i, x in enumerate(v):
            if x is None:
                if required:
                    raise Invalid(f"field {path}[{i}]: null item")
                out.append(None)
            else:
                out.append(item(x, f"{path}[{i}]"))
        return out

    return array


def _map(value: Check, required: bool) -> Check:
    def mapping(v: Any, path: str) -> Any:
        if not isinstance(v, dict):
            raise _fail(path, "map", v)
        out = []
        for k, x in sorted(v.items()):  # a map in key order, whichever order it came in
            if x is None:
                if required:
                    raise Invalid(f"field {path}.{k}: null value")
                out.append((k, None))
            else:
                out.append((k, value(x, f"{path}.{k}")))
        return out

    return mapping


class RecordContract:
    """The contract of one schema (:meth:`TableSchema.contract`), compiled."""

    def __init__(self, contract: Mapping[str, Any]) -> None:
        self.members = [(f["name"], bool(f["required"]), compile_type(f["type"])) for f in contract["fields"]]
        self.names = frozenset(name for name, _, _ in self.members)

    def check(self, record: Mapping[str, Any]) -> dict[str, Any]:
        """The record's declared fields as the table holds them (undeclared ones left out); Invalid
        with the reason when it breaks the contract. Numbers may be parsed as Decimal or float."""
        return _members(self.members, record, "")

    def undeclared(self, record: Mapping[str, Any]) -> list[str]:
        """The record's top-level fields the schema does not declare."""
        return [k for k in record if k not in self.names]
