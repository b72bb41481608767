"""The record contract in Python (lakeflow/schema/records.py) against the shared test vectors,
tests/contracts/records.json: each record text fits its contract or breaks it with exactly the reason
given. The JVM's validator is checked against the same vectors in tests/integration/test_record_contract.py.

Unit tests: they start no process."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from lakeflow.schema import load_schema
from lakeflow.schema.records import EXPECTED, Invalid, RecordContract

VECTORS_FILE = Path(__file__).resolve().parents[1] / "contracts" / "records.json"
VECTORS = json.loads(VECTORS_FILE.read_text())
CASES = [(name, record, reason) for name, cases in VECTORS["cases"].items() for record, reason in cases]


def parse(text: str) -> Any:
    """A record as the JVM reads it: strict JSON, every number exact (integers as int, others as Decimal)."""

    def refuse(constant: str) -> Any:
        raise ValueError(f"{constant} is not JSON")

    return json.loads(text, parse_float=Decimal, parse_constant=refuse)


def reason_of(contract: dict, text: str) -> str | None:
    try:
        RecordContract(contract).check(parse(text))
    except Invalid as exc:
        return str(exc)
    return None


@pytest.mark.parametrize(("contract", "record", "reason"), CASES, ids=[f"{c}-{i}" for i, (c, _, _) in enumerate(CASES)])
def test_python_gives_the_vectors_reasons(contract: str, record: str, reason: str | None) -> None:
    assert reason_of(VECTORS["contracts"][contract], record) == reason


def test_the_sensor_reading_contract_is_the_default_schemas() -> None:
    assert VECTORS["contracts"]["sensor-reading"] == json.loads(load_schema().contract_json())


def test_the_vectors_cover_every_kind_at_the_top_and_nested() -> None:
    def kinds(spec: dict, nested: bool) -> set[tuple[str, bool]]:
        found = {(spec["kind"], nested)}
        for child in [f["type"] for f in spec.get("fields", ())] + [spec[k] for k in ("items", "values") if k in spec]:
            found |= kinds(child, nested or spec["kind"] != "record")
        return found

    covered = set().union(*(kinds({"kind": "record", "fields": c["fields"]}, False) for c in VECTORS["contracts"].values()))
    assert {k for k, _ in covered} >= set(EXPECTED)
    assert {k for k, nested in covered if nested} >= {"struct", "list", "map", "decimal", "timestamptz", "int", "long"}
    for name, cases in VECTORS["cases"].items():
        reasons = [reason for _, reason in cases]
        assert None in reasons and any(reasons), f"{name}: no fitting record, or none breaking the contract"

