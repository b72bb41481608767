"""The record contract: whether a JSON record fits the declared schema, and why not.

:meth:`TableSchema.contract` writes the contract as JSON; the ingestion job's validator (``Records``,
java/) enforces it on every Kafka message, the compaction on every record of a part file (here: the
exact path; the fast path only ever takes files this would take whole). Both give the same reasons:
tests/contracts/records.json holds the cases both are checked against. :func:`message_record` is the
validator's whole check of one Kafka message (``KafkaReadings.record``, java/): the message itself
(no tombstone, within the size limit, one strict JSON object), then the contract; the record re-written
compactly as the JVM writes it (:func:`compact_json`). ``lakeflow dead-letters replay`` uses it.

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

import json
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


# --- one Kafka message, as KafkaReadings (java/) checks and re-writes it --------------------------


def message_record(payload: bytes | None, contract: RecordContract, max_bytes: int) -> str:
    """The record in the Kafka message ``payload`` re-written compactly on one line (:func:`compact_json`),
    as the ingestion job's validator (``KafkaReadings.record``) passes it on; Invalid with the JVM's
    reason otherwise: ``no value (a tombstone)``, ``too large: N bytes, more than M``, ``not JSON: …``
    (malformed, trailing data, a duplicate key; the parser's own words follow the colon),
    ``not a JSON object (empty)``, ``not a JSON object: an array``…, then the contract's."""
    if payload is None:
        raise Invalid("no value (a tombstone)")
    if len(payload) > max_bytes:
        raise Invalid(f"too large: {len(payload)} bytes, more than {max_bytes}")
    try:
        text = payload.decode(json.detect_encoding(payload), "surrogatepass")  # as json.loads(bytes) reads
    except (UnicodeDecodeError, LookupError) as exc:
        raise Invalid(f"not JSON: {exc}") from None
    if not text.strip(" \t\n\r\ufeff"):
        raise Invalid("not a JSON object (empty)")
    try:
        root = _STRICT.decode(text.removeprefix("\ufeff"))
    except RecursionError:
        raise Invalid("not JSON: nested too deeply") from None
    except ValueError as exc:  # JSONDecodeError, a duplicate key, NaN or Infinity
        raise Invalid(f"not JSON: {exc}") from None
    if not isinstance(root, dict):
        raise Invalid(f"not a JSON object: {got(root)}")
    contract.check(root)
    return compact_json(root)


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"Duplicate field '{key}'")  # Jackson's words (STRICT_DUPLICATE_DETECTION)
        out[key] = value
    return out


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _integer(text: str) -> int:
    """A JSON integer, exactly: beyond Python's digit limit for str → int through Decimal (exact too)."""
    return int(text) if len(text) < 4000 else int(Decimal(text))


# Strict and exact as the JVM's reader: numbers as written (integers as int, others as Decimal).
_STRICT = json.JSONDecoder(
    parse_float=Decimal, parse_int=_integer, parse_constant=_no_constant, object_pairs_hook=_no_duplicates
)
_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}
_TO_ESCAPE = re.compile(r'["\\\x00-\x1f\ud800-\udfff]')


def _escape(m: re.Match[str]) -> str:
    c = m.group()
    return _ESCAPES.get(c) or f"\\u{ord(c):04X}"  # other control characters (and lone surrogates): \u00XX


def compact_json(value: Any) -> str:
    """``value`` (as :func:`message_record` parses it) written as the JVM's validator writes a record
    (Jackson): no spaces, keys in their order, strings unescaped but for ``"``, ``\\`` and control
    characters, every number as sent (``5.0`` stays ``5.0``, ``1e3`` is ``1E+3``, ``-0.0`` is ``0.0``:
    Java's BigDecimal has no negative zero)."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value) if value.bit_length() < 13_000 else str(Decimal(value))  # (str's digit limit)
    if isinstance(value, Decimal):
        return str(value.copy_abs() if value.is_zero() else value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        return f'"{_TO_ESCAPE.sub(_escape, value)}"'
    if isinstance(value, list):
        return "[" + ",".join(compact_json(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{compact_json(str(k))}:{compact_json(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"no JSON value: {type(value).__name__}")
