"""The synthetic sensors: records of the declared schema, made on the JVM by ``SensorRecords``
(java/lakeflow/flink/SensorRecords.java) from the spec :meth:`Generator.spec` writes, and the same records in
Python (:meth:`Generator.record`: a producer of messages to a Kafka topic, ``lakeflow demo --source kafka``).

Tick ``seq`` belongs to device ``seq % NUM_SENSORS`` (round robin: every device reports at the same rate).
Each field is made as its ``x-lakeflow-generate`` hint says (:data:`Hint`; docs/ingestion.md, "The
generator"); unhinted, the event-time field is the tick's time, a key field the tick's ``seq`` (synthetic
records never collide on the key; a string key field beside one carrying the ``seq``: its device) and
any other field a default of its type (:func:`default_hint`). A struct's fields, a list's items
(:data:`LIST_ITEMS` of them, at most ``maxItems``) and a map's values (keys :data:`MAP_KEYS`) are made
the same way, each by the hint at its path (``gps.lat``, ``accel[]``, ``tags{}``).

Each record is one JSON document, its fields in declared order: numbers fixed-point (rounded half up, as
Flink SQL's cast to a decimal), strings unescaped — so a hint's strings may hold no ``"``, ``\\`` or control
character.
"""

from __future__ import annotations

import json
import math
import random
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass
from datetime import datetime, timezone
from decimal import Decimal
from typing import Annotated, Any, ClassVar, Literal, NamedTuple

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    TypeAdapter,
    ValidationError,
)
from pyiceberg.types import DecimalType, IcebergType, ListType, MapType, PrimitiveType, StructType

from lakeflow.schema import TableSchema
from lakeflow.schema.model import FieldRules
from lakeflow.schema.records import Invalid, compile_type
from lakeflow.schema.types import SchemaError, kind

DAY_MS = 86_400_000  # a daily cycle's period, in the ticks' milliseconds
LIST_ITEMS = 3  # a list's items (at most its maxItems)
MAP_KEYS = ("key1", "key2")  # a map's keys
_SAFE = re.compile(r'[^"\\\x00-\x1f]*')  # what a JSON string holds unescaped
_RUN_ID = re.compile(r"[A-Za-z0-9_.:-]+")


class Tick(NamedTuple):
    """One tick: its ``seq``, its time (epoch milliseconds) and its device (``seq % NUM_SENSORS``, from 0)."""

    seq: int
    timestamp_ms: int
    device: int


@dataclass(frozen=True)
class Context:
    """What every field's spec and value may use besides the tick."""

    num_sensors: int
    run_id: str

    @property
    def width(self) -> int:
        """Digits in a device number: ``001`` up to 999 devices, wider beyond."""
        return max(3, len(str(self.num_sensors)))


class _Hint(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    FITS: ClassVar[tuple[str, ...]]  # the field kinds it makes

    @abstractmethod
    def spec(self, t: PrimitiveType, c: Context) -> dict[str, Any]:
        """How ``SensorRecords`` makes the field: its generator (``make``) and what that takes."""

    @abstractmethod
    def value(self, t: PrimitiveType, c: Context, tick: Tick, rng: random.Random) -> Any:
        """The same value in Python, as JSON holds it."""

    def digits(self) -> tuple[int, int]:
        """A double or float's integer digits and decimal places, as the JSON writes it (the hints
        that make them say)."""
        raise NotImplementedError

    def check(self, t: PrimitiveType, rules: FieldRules, path: str) -> None:
        """SchemaError naming ``path`` when the hint cannot make the field."""


class Device(_Hint):
    """The device's id: ``prefix`` + its number from 1, zero-padded (``sensor-001``); an integer field: the number."""

    kind: Literal["device"]
    prefix: str = ""
    FITS: ClassVar[tuple[str, ...]] = ("string", "long", "int")

    def spec(self, t: PrimitiveType, c: Context) -> dict[str, Any]:
        return {"make": "device", "prefix": self.prefix, "width": c.width}

    def value(self, t: PrimitiveType, c: Context, tick: Tick, rng: random.Random) -> Any:
        return f"{self.prefix}{tick.device + 1:0{c.width}d}" if kind(t) == "string" else tick.device + 1

    def check(self, t: PrimitiveType, rules: FieldRules, path: str) -> None:
        _require_safe(self.prefix, path)


class RunId(_Hint):
    """The job run's id (one per submission; a constant of the job graph, so a recovery keeps it)."""

    kind: Literal["run-id"]
    FITS: ClassVar[tuple[str, ...]] = ("string",)

    def spec(self, t: PrimitiveType, c: Context) -> dict[str, Any]:
        return {"make": "constant", "text": c.run_id}

    def value(self, t: PrimitiveType, c: Context, tick: Tick, rng: random.Random) -> Any:
        return c.run_id


class Sequence(_Hint):
    """The tick's ``seq``: 0, 1, 2 … unique within the run, continued after a recovery (an int: modulo 2³¹)."""

    kind: Literal["sequence"]
    FITS: ClassVar[tuple[str, ...]] = ("long", "int", "string")

    def spec(self, t: PrimitiveType, c: Context) -> dict[str, Any]:
        return {"make": "sequence"}

    def value(self, t: PrimitiveType, c: Context, tick: Tick, rng: random.Random) -> Any:
        return {"long": tick.seq, "int": tick.seq % 2**31, "string": str(tick.seq)}[kind(t)]


class EventTime(_Hint):
    """The tick's time: epoch milliseconds, a UTC date-time (``…Z`` for a timestamptz), or its UTC day."""

    kind: Literal["event-time"]
    FITS: ClassVar[tuple[str, ...]] = ("long", "timestamptz", "timestamp", "date")

    def spec(self, t: PrimitiveType, c: Context) -> dict[str, Any]:
        return {"make": "event-time"}

    def value(self, t: PrimitiveType, c: Context, tick: Tick, rng: random.Random) -> Any:
        k = kind(t)
        if k == "long":
            return tick.timestamp_ms
        when = datetime.fromtimestamp(tick.timestamp_ms // 1000, timezone.utc)
        if k == "date":
            return when.date().isoformat()
        return f"{when:%Y-%m-%dT%H:%M:%S}.{tick.timestamp_ms % 1000:03d}" + ("Z" if k == "timestamptz" else "")


class DailyCycle(_Hint):
    """A number around the device's baseline ``low + spread * (index * prime mod 1000) / 1000``:
    ``+ amplitude * sin(2π · time of day + index)`` and ``+ noise * (uniform - 0.5)``, clamped to ``min``
    and ``max``; written with ``places`` decimals (a decimal field: its scale; an integer: rounded)."""

    kind: Literal["daily-cycle"]
    low: float
    spread: float = 0.0
    prime: int = 1
    amplitude: float = 0.0
    noise: float = Field(0.0, ge=0)
    min: float | None = None
    max: float | None = None
    places: int = Field(2, ge=0, le=18)
    FITS: ClassVar[tuple[str, ...]] = ("double", "float", "decimal", "long", "int")

    def base(self, index: int) -> float:
        """Device ``index``'s baseline."""
        return self.low + self.spread * (index * self.prime % 1000) / 1000

    def bound(self) -> float:
        """The largest magnitude a value takes."""
        if self.min is not None and self.max is not None:
            return max(abs(self.min), abs(self.max))
        return abs(self.low) + abs(self.spread) + abs(self.amplitude) + self.noise / 2

    def _cycle(self, tick: Tick, rng: random.Random) -> float:
        day = math.sin(2 * math.pi * (tick.timestamp_ms % DAY_MS) / DAY_MS + tick.device)
        value = self.base(tick.device) + self.amplitude * day + self.noise * (rng.random() - 0.5)
        if self.max is not None:
            value = min(self.max, value)
        return value if self.min is None else max(self.min, value)

    def spec(self, t: PrimitiveType, c: Context) -> dict[str, Any]:
        return {"make": "daily-cycle", **self.model_dump(exclude={"kind", "places"})}

    def value(self, t: PrimitiveType, c: Context, tick: Tick, rng: random.Random) -> Any:
        value = self._cycle(tick, rng)
        if isinstance(t, DecimalType):
            limit = float(_largest(t))
            return round(max(-limit, min(limit, value)), t.scale)
        return int(round(value)) if kind(t) in ("long", "int") else round(value, self.places)

    def digits(self) -> tuple[int, int]:
        return len(str(int(self.bound()))), self.places

    def check(self, t: PrimitiveType, rules: FieldRules, path: str) -> None:
        limit = {"int": 2**31 - 1, "long": 2**63 - 1024, "float": 3.4e38}.get(kind(t))
        if limit is not None and self.bound() > limit:
            raise SchemaError(
                f"{path}: x-lakeflow-generate makes numbers up to {self.bound():g}, beyond "
                + ("an int" if kind(t) == "int" else f"a {kind(t)}")
            )


class PerDevice(_Hint):
    """One of ``values``, by device: device ``index`` has ``values[index % len(values)]``."""

    kind: Literal["per-device"]
    values: list[StrictBool | StrictInt | StrictFloat | StrictStr] = Field(min_length=1)
    FITS: ClassVar[tuple[str, ...]] = ("string", "long", "int", "double", "float", "boolean", "decimal")

    def spec(self, t: PrimitiveType, c: Context) -> dict[str, Any]:
        if kind(t) == "boolean":
            return {"make": "per-device", "values": ["true" if v else "false" for v in self.values]}
        return {"make": "per-device", "values": [str(v) for v in self.values]}

    def value(self, t: PrimitiveType, c: Context, tick: Tick, rng: random.Random) -> Any:
        return self.values[tick.device % len(self.values)]

    def digits(self) -> tuple[int, int]:
        numbers = [Decimal(repr(v)) for v in self.values]
        places = max(-int(n.as_tuple().exponent) for n in numbers)
        return len(str(int(max(abs(n) for n in numbers)))), max(places, 0)

    def check(self, t: PrimitiveType, rules: FieldRules, path: str) -> None:
        spec: dict[str, Any] = {"kind": kind(t)}
        if isinstance(t, DecimalType):
            spec.update(precision=t.precision, scale=t.scale)
        if rules.max_length is not None:
            spec["maxLength"] = rules.max_length
        fits = compile_type(spec)
        for v in self.values:
            try:
                fits(v, path)
            except Invalid as exc:
                raise SchemaError(f"x-lakeflow-generate value {v!r} does not fit: {exc}") from None
            if isinstance(v, str):
                _require_safe(v, path)


class _Coin(_Hint):
    """true or false, at random (an unhinted boolean)."""

    FITS: ClassVar[tuple[str, ...]] = ("boolean",)

    def spec(self, t: PrimitiveType, c: Context) -> dict[str, Any]:
        return {"make": "coin"}

    def value(self, t: PrimitiveType, c: Context, tick: Tick, rng: random.Random) -> Any:
        return rng.random() < 0.5


Hint = Annotated[Device | RunId | Sequence | EventTime | DailyCycle | PerDevice, Field(discriminator="kind")]
_HINTS: TypeAdapter[Any] = TypeAdapter(Hint)


def parse_hint(spec: Any, path: str) -> _Hint:
    """The hint ``spec`` (a field's ``x-lakeflow-generate``); SchemaError naming ``path`` when it is none."""
    try:
        hint: _Hint = _HINTS.validate_python(spec)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'][1:])) or 'kind'}: {e['msg']}" for e in exc.errors())
        raise SchemaError(f"{path}: x-lakeflow-generate {spec}: {problems}") from None
    return hint


def default_hint(t: PrimitiveType, path: str, schema: TableSchema) -> _Hint:
    """How an unhinted field is made: the event time the tick's time, a key field the tick's ``seq``
    (a string one only when no other key field carries it: :func:`_counted`); otherwise by its type —
    a string ``<name>-<device number>``, an integer 0–1000, a double or float 0–100 (2 decimals), a
    decimal 0 up to 1000 (or its largest value below), a boolean at random, a date or timestamp the
    tick's time."""
    k = kind(t)
    if path == schema.event_time:
        return EventTime(kind="event-time")
    if path in schema.key and k in Sequence.FITS and not (k == "string" and _counted(schema)):
        return Sequence(kind="sequence")
    if k == "string":
        name = re.sub(r"(\[\]|\{\})+$", "", path).rsplit(".", 1)[-1]
        return Device(kind="device", prefix=re.sub(r'["\\\x00-\x1f]', "", name) + "-")
    if k in ("long", "int"):
        return DailyCycle(kind="daily-cycle", low=500.0, noise=1000.0, places=0)
    if k in ("double", "float"):
        return DailyCycle(kind="daily-cycle", low=50.0, noise=100.0)
    if isinstance(t, DecimalType):
        top = min(float(_largest(t)), 1000.0)
        return DailyCycle(kind="daily-cycle", low=top / 2, noise=top, places=t.scale)
    if k == "boolean":
        return _Coin()
    return EventTime(kind="event-time")


def _counted(schema: TableSchema) -> bool:
    """Whether a key field carries the tick's ``seq`` whatever the unhinted string ones make: one hinted
    ``sequence``, or an unhinted long or int other than the event time. The key then stays unique with
    each unhinted string key field a device's (``device_id-001``)."""
    for name in schema.key:
        generate = schema.rules.get(name, FieldRules()).generate
        if generate is not None:
            if isinstance(parse_hint(generate, name), Sequence):
                return True
        elif name != schema.event_time and kind(schema.field(name).field_type) in ("long", "int"):
            return True
    return False


def _largest(t: DecimalType) -> Decimal:
    """The largest value of ``t``: ``999.99`` for decimal(5,2)."""
    return Decimal(10) ** (t.precision - t.scale) - Decimal(1).scaleb(-t.scale)


def _require_safe(text: str, path: str) -> None:
    if not _SAFE.fullmatch(text):
        raise SchemaError(
            f"{path}: x-lakeflow-generate {text!r}: a generated string may hold no '\"', '\\' or control character"
        )


class _Node(ABC):
    """One generated value of the schema: how ``SensorRecords`` makes its JSON, and the same value in Python."""

    @abstractmethod
    def spec(self) -> dict[str, Any]: ...

    @abstractmethod
    def value(self, tick: Tick, rng: random.Random) -> Any: ...


@dataclass(frozen=True)
class _Leaf(_Node):
    t: PrimitiveType
    hint: _Hint
    c: Context
    max_length: int | None

    def spec(self) -> dict[str, Any]:
        spec = {"kind": kind(self.t), **self.hint.spec(self.t, self.c), "maxLength": self.max_length}
        if isinstance(self.t, DecimalType):
            spec |= {"precision": self.t.precision, "scale": self.t.scale, "limit": float(_largest(self.t))}
        elif kind(self.t) in ("double", "float"):
            digits, places = self.hint.digits()
            spec |= {"precision": max(10, digits + places), "scale": places}
        return spec

    def value(self, tick: Tick, rng: random.Random) -> Any:
        v = self.hint.value(self.t, self.c, tick, rng)
        return v if self.max_length is None else v[: self.max_length]


@dataclass(frozen=True)
class _Struct(_Node):
    fields: tuple[tuple[str, _Node], ...]

    def spec(self) -> dict[str, Any]:
        return _object(self.fields)

    def value(self, tick: Tick, rng: random.Random) -> Any:
        return {name: node.value(tick, rng) for name, node in self.fields}


@dataclass(frozen=True)
class _List(_Node):
    items: tuple[_Node, ...]

    def spec(self) -> dict[str, Any]:
        return {"array": [node.spec() for node in self.items]}

    def value(self, tick: Tick, rng: random.Random) -> Any:
        return [node.value(tick, rng) for node in self.items]


def _object(members: tuple[tuple[str, _Node], ...]) -> dict[str, Any]:
    """A JSON object's spec: each member's name as JSON text, and its value's spec."""
    return {"object": [[json.dumps(name, ensure_ascii=False), node.spec()] for name, node in members]}


class Generator:
    """The synthetic records of ``schema``: ``num_sensors`` devices, run ``run_id``. SchemaError names
    the field whose hint cannot make it."""

    def __init__(self, schema: TableSchema, num_sensors: int, run_id: str) -> None:
        if not _RUN_ID.fullmatch(run_id):
            raise ValueError(f"run_id={run_id!r}: expected letters, digits, '_', '.', ':' or '-'")
        self.schema = schema
        self.context = Context(num_sensors, run_id)
        self.fields = tuple((f.name, self._node(f.field_type, f.name)) for f in schema.fields.fields)

    def _node(self, t: IcebergType, path: str) -> _Node:
        rules = self.schema.rules.get(path, FieldRules())
        if isinstance(t, (StructType, ListType, MapType)):
            if rules.generate is not None:
                raise SchemaError(f"{path}: x-lakeflow-generate applies to fields of primitive types, not a {kind(t)}")
            if isinstance(t, StructType):
                return _Struct(tuple((f.name, self._node(f.field_type, f"{path}.{f.name}")) for f in t.fields))
            if isinstance(t, ListType):
                count = min(LIST_ITEMS, LIST_ITEMS if rules.max_items is None else rules.max_items)
                return _List(tuple(self._node(t.element_type, f"{path}[]") for _ in range(count)))
            return _Struct(tuple((key, self._node(t.value_type, f"{path}{{}}")) for key in MAP_KEYS))
        assert isinstance(t, PrimitiveType)
        hint = default_hint(t, path, self.schema) if rules.generate is None else parse_hint(rules.generate, path)
        if kind(t) not in hint.FITS:
            raise SchemaError(
                f"{path}: x-lakeflow-generate {getattr(hint, 'kind', '')} makes a {' or '.join(hint.FITS)}, "
                f"not a {kind(t)}"
            )
        hint.check(t, rules, path)
        leaf = _Leaf(t, hint, self.context, rules.max_length)
        if kind(t) in ("double", "float") and sum(hint.digits()) > 38:
            raise SchemaError(f"{path}: x-lakeflow-generate makes numbers of more than 38 digits")
        return leaf

    def spec(self) -> str:
        """The records as ``SensorRecords`` makes them (java/lakeflow/flink/SensorRecords.java): JSON."""
        return json.dumps(_object(self.fields), ensure_ascii=False)

    def record(self, seq: int, timestamp_ms: int, rng: random.Random) -> dict[str, Any]:
        """Record ``seq`` at ``timestamp_ms`` as ``SensorRecords`` makes it, in Python (its random parts from ``rng``)."""
        tick = Tick(seq, timestamp_ms, seq % self.context.num_sensors)
        return {name: node.value(tick, rng) for name, node in self.fields}
