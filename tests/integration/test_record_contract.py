"""The record contract on the JVM (``KafkaReadings`` and ``RecordContract``, java/) against the shared
test vectors, tests/contracts/records.json — the same reasons as lakeflow/schema/records.py
(tests/unit/test_record_contract.py) — and each valid message passed on whole: one line, every
field (undeclared ones too), every number as sent."""

from __future__ import annotations

import json
import os
import subprocess
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from tests.support.envs import INGEST_PY
from tests.unit.test_record_contract import VECTORS

ROOT = Path(__file__).resolve().parents[2]
MAX_BYTES = 1 << 20

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def jvm(tmp_path_factory: pytest.TempPathFactory):
    """A child of the ingestion environment driving KafkaReadings on PyFlink's gateway JVM
    (tests/support/record_contract_child.py)."""
    env = {**os.environ, "FLINK_LOG_DIR": str(tmp_path_factory.mktemp("flink-log"))}
    child = subprocess.Popen([INGEST_PY, "-m", "tests.support.record_contract_child"], cwd=ROOT, env=env, text=True,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    yield child
    child.stdin.close()
    assert child.wait(timeout=60) == 0


def validate(jvm, contract: dict, messages: list[str], max_bytes: int = MAX_BYTES) -> list[dict]:
    jvm.stdin.write(json.dumps({"contract": json.dumps(contract), "max_bytes": max_bytes, "messages": messages}) + "\n")
    jvm.stdin.flush()
    return json.loads(jvm.stdout.readline())["results"]


def exact(text: str) -> Any:
    """``text`` parsed with every number as written: an integer's value, a decimal's digits and exponent
    (``5.0`` is not ``5``; ``1e3`` is ``1E+3``; ``-0.0`` is ``0.0``: Java's BigDecimal has no negative zero)."""

    def decimal(s: str) -> tuple:
        value = Decimal(s)
        return ("decimal", (value if value else abs(value)).as_tuple())

    return json.loads(text, parse_float=decimal)


@pytest.mark.parametrize("contract", list(VECTORS["cases"]))
def test_the_jvm_gives_the_vectors_reasons_and_passes_valid_records_whole(jvm, contract: str) -> None:
    cases = VECTORS["cases"][contract]
    results = validate(jvm, VECTORS["contracts"][contract], [record for record, _ in cases])
    assert [r["reason"] for r in results] == [reason for _, reason in cases]
    for (message, _), result in zip(cases, results):
        if result["reason"] is None:
            assert "\n" not in result["record"] and ": " not in result["record"].replace('": "', "")
            assert exact(result["record"]) == exact(message), message


def test_messages_that_are_no_json_object_are_refused_before_the_contract(jvm) -> None:
    contract, large = VECTORS["contracts"]["sensor-reading"], json.dumps({"sensor_id": "x" * 100})
    reasons = [r["reason"] for r in validate(jvm, contract, [
        "not json", '{"sensor_id": "s"', '{"a": 1} {"b": 2}', '{"a": 1, "a": 2}', "[1, 2]", "5", '"text"', "", large],
                                                  max_bytes=64)]
    assert [r.split(":")[0] for r in reasons[:4]] == ["not JSON"] * 4
    assert reasons[4:8] == ["not a JSON object: an array", "not a JSON object: an integer",
                            "not a JSON object: a string", "not a JSON object (empty)"]
    assert reasons[8] == f"too large: {len(large)} bytes, more than 64"
