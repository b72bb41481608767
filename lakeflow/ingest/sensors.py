"""The synthetic sensors: who they are, their per-sensor baselines, and the SQL that turns a
``(seq, timestamp_ms)`` tick into one reading as a JSON document.

Reading ``seq`` belongs to sensor ``seq % num_sensors`` (round robin, so every sensor reports
at the same rate). A sensor's baselines are a pure function of its index — the same in every
run — and the SQL computes them from the index with the constants below; :func:`baseline` is
the same formula in Python, for tests and docs. Around its baseline a value follows a daily
cycle plus uniform noise; humidity is clamped to 20–95 %.
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass

from lakeflow.readings import DAY_MS, FIELDS

LOCATIONS = (
    "greenhouse-north",
    "greenhouse-south",
    "cold-store",
    "packing-hall",
    "loading-dock",
    "office",
    "server-room",
    "rooftop",
)
HUMIDITY_MIN, HUMIDITY_MAX = 20.0, 95.0


@dataclass(frozen=True)
class Quantity:
    """``low + spread * u(index)`` with ``u = (index * prime mod 1000) / 1000`` as the baseline;
    ``± amplitude`` over the day, ``± noise / 2`` per reading."""

    low: float
    spread: float
    prime: int
    amplitude: float
    noise: float

    def base(self, index: int) -> float:
        return self.low + self.spread * (index * self.prime % 1000) / 1000

    def base_sql(self, index: str) -> str:
        return f"({self.low} + {self.spread} * MOD({index} * {self.prime}, 1000) / 1000.0)"


TEMPERATURE = Quantity(low=16.0, spread=12.0, prime=389, amplitude=3.0, noise=0.6)  # °C
HUMIDITY = Quantity(low=35.0, spread=30.0, prime=571, amplitude=8.0, noise=2.0)  # % RH
PRESSURE = Quantity(low=1003.0, spread=20.0, prime=733, amplitude=1.5, noise=0.4)  # hPa


@dataclass(frozen=True)
class Baseline:
    sensor_id: str
    location: str
    temperature: float
    humidity: float
    pressure: float


def id_width(num_sensors: int) -> int:
    """Digits in a sensor number: ``sensor-001`` up to 999 sensors, wider beyond."""
    return max(3, len(str(num_sensors)))


def sensor_id(index: int, num_sensors: int) -> str:
    """``sensor-001`` for index 0."""
    return f"sensor-{index + 1:0{id_width(num_sensors)}d}"


def baseline(index: int, num_sensors: int) -> Baseline:
    """Sensor ``index``'s identity and baselines (what the SQL computes for it)."""
    return Baseline(
        sensor_id(index, num_sensors),
        LOCATIONS[index % len(LOCATIONS)],
        TEMPERATURE.base(index),
        HUMIDITY.base(index),
        PRESSURE.base(index),
    )


def reading(seq: int, num_sensors: int, run_id: str, timestamp_ms: int, rng: random.Random) -> dict[str, object]:
    """Reading ``seq`` as :func:`readings_sql` makes it, in Python (a producer of readings to a
    Kafka topic: ``lakeflow demo --source kafka``); fields in :data:`lakeflow.readings.FIELDS` order."""
    index = seq % num_sensors
    base = baseline(index, num_sensors)
    day = math.sin(2 * math.pi * (timestamp_ms % DAY_MS) / DAY_MS + index)

    def value(q: Quantity, baseline: float, sign: int = 1) -> float:
        return baseline + sign * q.amplitude * day + q.noise * (rng.random() - 0.5)

    humidity = max(HUMIDITY_MIN, min(HUMIDITY_MAX, value(HUMIDITY, base.humidity, -1)))
    values = (
        base.sensor_id,
        run_id,
        seq,
        timestamp_ms,
        round(value(TEMPERATURE, base.temperature), 2),
        round(humidity, 2),
        round(value(PRESSURE, base.pressure), 2),
        base.location,
    )
    return dict(zip((name for name, _ in FIELDS), values, strict=True))


def readings_sql(ticks: str, num_sensors: int, run_id: str) -> str:
    """SELECT the typed readings (:data:`lakeflow.readings.FIELDS`) from a view of ``(seq, timestamp_ms)``."""
    _require_json_safe(run_id, "run_id")
    day = f"SIN(2 * PI() * (timestamp_ms % {DAY_MS}) / {DAY_MS}.0 + idx)"

    def value(q: Quantity, sign: str = "+") -> str:
        return f"{q.base_sql('idx')} {sign} {q.amplitude} * {day} + {q.noise} * (RAND() - 0.5)"

    locations = ", ".join(f"'{name}'" for name in LOCATIONS)
    return f"""
SELECT
  CONCAT('sensor-', LPAD(CAST(idx + 1 AS STRING), {id_width(num_sensors)}, '0')) AS sensor_id,
  '{run_id}' AS run_id,
  seq,
  timestamp_ms,
  {value(TEMPERATURE)} AS temperature,
  GREATEST({HUMIDITY_MIN}, LEAST({HUMIDITY_MAX}, {value(HUMIDITY, "-")})) AS humidity,
  {value(PRESSURE)} AS pressure,
  ELT(CAST(MOD(idx, {len(LOCATIONS)}) AS INT) + 1, {locations}) AS location
FROM (SELECT seq, timestamp_ms, MOD(seq, {num_sensors}) AS idx FROM {ticks})"""


def json_sql(readings: str) -> str:
    """SELECT one column ``reading``: each row of ``readings`` as a JSON document, fields in
    :data:`lakeflow.readings.FIELDS` order. Strings are sensor ids, a UUID and :data:`LOCATIONS`
    (nothing to escape); decimals are fixed-point with 2 places (never ``1.0E-4``, ``NaN`` or
    ``Infinity``)."""

    def number(column: str) -> str:
        return f"CAST(CAST({column} AS DECIMAL(10, 2)) AS STRING)"

    parts: list[str] = []
    for i, (name, kind) in enumerate(FIELDS):
        key = ("{" if i == 0 else ",") + f'"{name}":'
        if kind is str:
            parts += [f"'{key}\"'", name, "'\"'"]
        elif kind is int:
            parts += [f"'{key}'", f"CAST({name} AS STRING)"]
        else:
            parts += [f"'{key}'", number(name)]
    parts.append("'}'")
    return f"SELECT CONCAT({', '.join(parts)}) AS reading FROM {readings}"


def _require_json_safe(value: str, what: str) -> None:
    if not re.fullmatch(r"[A-Za-z0-9_.:-]+", value):
        raise ValueError(
            f"{what}={value!r}: expected letters, digits, '_', '.', ':' or '-' "
            "(it is written into JSON and SQL without escaping)"
        )


for _name in LOCATIONS:
    _require_json_safe(_name, "location")
