"""The compiled decoder (lakeflow_native, rust/) against the exact path: on the shared contract vectors
(tests/contracts/records.json) and on thousands of generated part files, it takes a file only when the
exact path (Python's json, the contract record by record) takes every record of it, and then gives the
same rows; the parser gives the same result with it and without it. Unit tests: no process is started."""

from __future__ import annotations

import json
import random
import shutil
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

from lakeflow.compaction import parse
from lakeflow.compaction.parse import NATIVE_KINDS, Parser, _storable, native_arrays, native_decode, records_of
from lakeflow.schema import load_schema
from lakeflow.schema.records import Invalid, RecordContract
from tests.unit.test_record_contract import CASES, VECTORS

needs_native = pytest.mark.skipif(native_decode is None, reason="lakeflow_native is not built (no cargo)")
TYPES = {"string": pa.string(), "long": pa.int64(), "int": pa.int32(), "double": pa.float64(),
         "float": pa.float32(), "boolean": pa.bool_()}


def test_the_native_decoder_is_built_where_cargo_is() -> None:
    if shutil.which("cargo"):
        assert native_decode is not None, "cargo is here but lakeflow_native is not installed: make install builds it"


def flat(contract: dict) -> list[dict]:
    """The contract's flat scalar fields (the others, left out, become undeclared fields)."""
    return [f for f in contract["fields"] if f["type"]["kind"] in NATIVE_KINDS]


def native_fields(fields: list[dict]) -> list[tuple]:
    return [(f["name"], f["type"]["kind"], f["required"], f["type"].get("maxLength")) for f in fields]


def exact(blob: bytes, fields: list[dict]) -> list[dict] | None:
    """The exact path's rows of one file, or None unless it takes every record of the file."""
    texts = records_of(blob)
    if texts is None or isinstance(texts, str):
        return None
    contract = RecordContract({"fields": fields})
    try:
        return [_storable(contract.check(record)) for _, record in texts]
    except Invalid:
        return None


def native(blobs: list[bytes], fields: list[dict]) -> tuple[list[int], list[dict]]:
    assert native_decode is not None
    taken, columns, _ = native_decode(blobs, native_fields(fields))
    rows = sum(t for t in taken if t > 0)
    arrays = native_arrays([TYPES[f["type"]["kind"]] for f in fields], rows, columns)
    table = pa.Table.from_arrays(arrays, names=[f["name"] for f in fields])
    table.validate(full=True)
    return taken, table.to_pylist()


def layouts(text: str) -> list[bytes]:
    """One record as a file of the sink's layout, of another layout, and alone."""
    record = json.loads(text, parse_float=Decimal)
    return [f"[{text}]\n".encode(), f"[ \n{text} ,\n{text}\t]".encode(), text.encode(),
            json.dumps([record, record], indent=2, default=str).encode() if "\\u" not in text else text.encode()]


def expected_rows(blob: bytes, fields: list[dict]) -> list[dict] | None:
    rows = exact(blob, fields)
    if rows is None:
        return None
    schema = pa.schema([(f["name"], TYPES[f["type"]["kind"]]) for f in fields])
    return pa.Table.from_pylist(rows, schema=schema).to_pylist()


@needs_native
@pytest.mark.parametrize(("contract", "record", "reason"), CASES, ids=[f"{c}-{i}" for i, (c, _, _) in enumerate(CASES)])
def test_the_vectors_are_taken_exactly_when_the_exact_path_takes_them(contract: str, record: str, reason: str | None) -> None:
    fields = flat(VECTORS["contracts"][contract])
    blobs = layouts(record)
    taken, rows = native(blobs, fields)
    expected: list[dict] = []
    for blob, count in zip(blobs, taken, strict=True):
        want = expected_rows(blob, fields)
        assert (count >= 0) == (want is not None), (blob, count, want)
        expected += want or []
    assert rows == expected


KEYS = ["sensor_id", "run_id", "seq", "timestamp_ms", "temperature", "humidity", "pressure", "location"]
VALUES: list[Any] = [
    "a", "", "é☃", "\U0001F600", "x" * 40, 'q"\\/\b\f\n\r\t', "\x00", 0, -0, 1, -1, 2**63 - 1, -(2**63), 2**63, 2**31,
    -(2**31) - 1, 10**400, 1.5, -0.0, 0.1, 1e308, 1e-320, True, False, None, [], {}, [1, {"a": [None]}], {"k": "v"},
]
NUMBER_TEXTS = ["-0", "-0.0", "1e400", "1E2", "1.0", "01", "1.", ".5", "-", "1e", "2e-400", "123456789012345678901",
                "9007199254740993", "-9223372036854775808", "9223372036854775808", "3.4028235e38", "NaN", "Infinity"]
SPELLINGS = [r'"\u00e9"', r'"\ud83d\ude00"', r'"\ud800"', r'"\udc00x"', r'"\u12"', r'"a\qb"', '"\x01"', '"\xff"',
             "tru", "nul", "[1,]", "{,}", '{"a" 1}', "[" * 600 + "]" * 600]


def random_record(rng: random.Random) -> str:
    """A record text: mostly the default schema's fields with good values, now and then anything."""
    parts = []
    for key in rng.sample(KEYS, k=len(KEYS)) if rng.random() < 0.2 else KEYS:
        if rng.random() < 0.05:
            continue
        roll = rng.random()
        if roll < 0.75:
            value = {"sensor_id": f'"s-{rng.randint(0, 9)}"', "run_id": '"r"', "location": '"hall"'}.get(key)
            if value is None:
                value = str(rng.randint(-10**6, 10**6)) if key in ("seq", "timestamp_ms") else repr(rng.uniform(-100, 100))
        elif roll < 0.85:
            value = json.dumps(rng.choice(VALUES), ensure_ascii=rng.random() < 0.5)
        elif roll < 0.95:
            value = rng.choice(NUMBER_TEXTS)
        else:
            value = rng.choice(SPELLINGS)
        parts.append(f'"{key}":{value}')
    if rng.random() < 0.15:
        parts.insert(rng.randint(0, len(parts)), f'"{rng.choice(["extra", "seq", "más", "n"])}":'
                                                f'{json.dumps(rng.choice(VALUES))}')
    if rng.random() < 0.05:
        parts.insert(0, r'"se\u0071":7')  # a declared key spelled with an escape
    space = rng.choice(["", " ", "\n", "\t", "\r\n"])
    return "{" + f",{space}".join(parts) + "}"


def random_file(rng: random.Random) -> bytes:
    records = [random_record(rng) for _ in range(rng.randint(0, 4))]
    form = rng.random()
    if form < 0.6:
        text = "[" + ",\n".join(records) + "]" + rng.choice(["", "\n"])
    elif form < 0.8:
        text = " [ " + " ,".join(records) + " ] "
    elif form < 0.85 and records:
        text = records[0]
    else:
        text = rng.choice(["", "[", "[]", "[{}] x", "\ufeff[]", "[1]", "[{}", "[{},]", "{}", "  "])
    return text.encode("utf-8", "surrogatepass")


def declined_on_purpose(blob: bytes) -> bool:
    """What the decoder leaves to the exact path though it may be good: a byte order mark, a declared key
    twice, a surrogate escape, deep nesting."""
    twice = False

    def pairs(items: list[tuple[str, Any]]) -> dict:
        nonlocal twice
        twice |= len({k for k, _ in items}) < len(items)
        return dict(items)

    json.loads(blob.decode("utf-8-sig"), object_pairs_hook=pairs)
    return blob.startswith(b"\xef\xbb\xbf") or twice or rb"\ud8" in blob or rb"\udc" in blob or b"[" * 600 in blob


@needs_native
def test_generated_files_are_taken_exactly_when_the_exact_path_takes_them() -> None:
    rng = random.Random(40)
    fields = flat(json.loads(load_schema().contract_json()))
    blobs = [random_file(rng) for _ in range(4000)]
    taken, rows = native(blobs, fields)
    expected: list[dict] = []
    for blob, count in zip(blobs, taken, strict=True):
        want = expected_rows(blob, fields)
        assert count < 0 or want is not None, blob
        assert count >= 0 or want is None or declined_on_purpose(blob), blob
        expected += want if count >= 0 else []
    assert rows == expected
    assert 0.2 < sum(t >= 0 for t in taken) / len(taken) < 0.9  # both outcomes, often


@needs_native
def test_the_parser_gives_the_same_result_with_and_without_it(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(7)
    blobs = [random_file(rng) for _ in range(2000)]
    schema = load_schema()
    with_native = Parser(schema)
    assert with_native.native is not None
    a = with_native.parse(blobs)
    monkeypatch.setattr(parse, "native_decode", None)
    without = Parser(schema)
    assert without.native is None
    b = without.parse(blobs)
    assert_same(a, b)
    assert a.rows.num_rows > 100 and b.bad


def assert_same(a: parse.Parsed, b: parse.Parsed) -> None:
    order = ["_file", "seq", "sensor_id", "timestamp_ms", "temperature"]
    assert a.rows.sort_by([(c, "ascending") for c in order]).to_pylist() == \
        b.rows.sort_by([(c, "ascending") for c in order]).to_pylist()
    assert a.rows.schema == b.rows.schema
    assert a.files == b.files
    assert sorted(a.bad, key=lambda r: (r.file, r.text)) == sorted(b.bad, key=lambda r: (r.file, r.text))
    assert a.undeclared == b.undeclared


@needs_native
def test_local_files_are_read_by_the_decoder_and_the_declined_ones_by_the_caller(tmp_path) -> None:
    rng = random.Random(11)
    blobs = [random_file(rng) for _ in range(600)]
    paths = []
    for i, blob in enumerate(blobs):
        (tmp_path / f"{i}.json").write_bytes(blob)
        paths.append(str(tmp_path / f"{i}.json"))
    paths.append(str(tmp_path / "gone.json"))  # unreadable here: declined, the caller's read says why
    asked: list[int] = []

    def read(indexes):
        asked.extend(indexes)
        return [blobs[i] if i < len(blobs) else b"" for i in indexes]

    parser = Parser(load_schema())
    assert_same(parser.parse_local(paths, read), parser.parse([*blobs, b""]))
    assert len(blobs) in asked and 0 < len(asked) < len(paths) * 0.8


def test_a_schema_of_nested_fields_is_not_decoded_natively() -> None:
    from tests.unit.test_parse import NESTED

    assert Parser(NESTED).native is None
