"""``lakeflow dead-letters`` (lakeflow/dead_letters.py, lakeflow/cli/dead_letters.py): the raw table's
dead letters counted by reason; replayed after a schema fix — what passes the stream's current contract
(checked as the JVM's KafkaReadings checks a message: tests/contracts/records.json) lands in the raw
table exactly once, whatever step a crash interrupts, and the compaction takes it once; the rest stay
with their new reason.

Unit tests: they start no process (file:// tables, the embedded local catalog, the compaction in process)."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from lakeflow import dead_letters
from lakeflow.cli.compact import compaction_pipeline, job_options
from lakeflow.cli.main import main
from lakeflow.compaction.config import load_config
from lakeflow.compaction.files import Storage
from lakeflow.compaction.streams import chosen_stream
from lakeflow.dead_letters import REPLAY_DIR, count, replay_into
from lakeflow.readings import bucket_name, is_committed_part
from lakeflow.schema import load_schema
from lakeflow.schema.records import Invalid, RecordContract, compact_json, message_record
from lakeflow.settings import load_settings
from tests.integration.test_record_contract import exact
from tests.support.fixtures_compaction import LakeflowHome, json_array, make_home, readings, write_parts
from tests.unit.test_record_contract import CASES, VECTORS

MAX = 65536
HOUR = timedelta(hours=1)
DEFAULT = Path(__file__).resolve().parents[2] / "lakeflow" / "schema" / "sensor-reading.schema.json"
OLD_REASON = "field humidity: expected an integer, got a number"  # what the broken schema said


# --- the check of one message: the JVM's ------------------------------------------------------------

@pytest.mark.parametrize(("contract", "record", "reason"), CASES, ids=[f"{c}-{i}" for i, (c, _, _) in enumerate(CASES)])
def test_a_message_is_checked_and_rewritten_as_the_jvm_does(contract: str, record: str, reason: str | None) -> None:
    try:
        text = message_record(record.encode(), RecordContract(VECTORS["contracts"][contract]), MAX)
    except Invalid as exc:
        assert str(exc) == reason
        return
    assert reason is None
    assert "\n" not in text and ": " not in text.replace('": "', "")  # one line, compact
    assert exact(text) == exact(record)                                # whole, every number as sent


def test_messages_that_are_no_json_object_get_the_jvms_reasons() -> None:
    contract, large = RecordContract(VECTORS["contracts"]["sensor-reading"]), json.dumps({"sensor_id": "x" * 100})
    reasons = []
    for message in [b"not json", b'{"sensor_id": "s"', b'{"a": 1} {"b": 2}', b'{"a": 1, "a": 2}', b"[1, 2]", b"5",
                    b'"text"', b"", large.encode(), None, b"\xff\xfe\xfa", b"[" * 60_000, b'{"a": NaN}']:
        with pytest.raises(Invalid) as caught:
            message_record(message, contract, 64 if message == large.encode() else MAX)
        reasons.append(str(caught.value))
    # the same as tests/integration/test_record_contract.py asks of the JVM
    assert [r.split(":")[0] for r in reasons[:4]] == ["not JSON"] * 4
    assert reasons[3] == "not JSON: Duplicate field 'a'"
    assert reasons[4:8] == ["not a JSON object: an array", "not a JSON object: an integer",
                            "not a JSON object: a string", "not a JSON object (empty)"]
    assert reasons[8] == f"too large: {len(large)} bytes, more than 64"
    assert reasons[9] == "no value (a tombstone)"
    assert all(r.startswith("not JSON: ") for r in reasons[10:])


def test_records_are_written_compactly_numbers_as_sent() -> None:
    text = message_record('{ "a" : 5.0, "b": 87.50, "c": -0.0, "d": 1e3, "e": "x\\u0001\\n\u00e9/", "f": [1, {"g": null}], '
                          '"h": 123456789012345678901234567890}'.encode(), RecordContract({"fields": []}), MAX)
    assert text == ('{"a":5.0,"b":87.50,"c":0.0,"d":1E+3,"e":"x\\u0001\\n\u00e9/","f":[1,{"g":null}],'
                    '"h":123456789012345678901234567890}')
    assert compact_json({"k": True, "l": False}) == '{"k":true,"l":false}'


# --- a raw table with dead letters --------------------------------------------------------------------

def broken_schema(path: Path) -> Path:
    """The default schema with humidity declared an integer: the schema file before its fix."""
    schema = json.loads(DEFAULT.read_text())
    schema["properties"]["humidity"]["type"] = "integer"
    path.write_text(json.dumps(schema))
    return path


def letter(message: bytes | None, reason: str, offset: int, *, topic: str = "sensor-readings") -> dict[str, Any]:
    """A dead letter as KafkaReadings writes it."""
    out: dict[str, Any] = {"reason": reason, "topic": topic, "partition": offset % 2, "offset": offset}
    try:
        out["payload"] = None if message is None else message.decode("utf-8")
    except UnicodeDecodeError:
        out["payload_base64"] = base64.b64encode(message).decode()  # type: ignore[arg-type]
    return out


def dead_letter_file(raw: Path, bucket: str, letters: list[dict], name: str | None = None) -> Path:
    path = raw / "_dead_letters" / bucket / (name or f"part-{uuid.uuid4()}-0-0.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json_array(letters))
    return path


def messages(contract: RecordContract, texts: list[bytes | None], first_offset: int) -> list[dict]:
    """Letters of ``texts`` with the reasons the ingestion job gave them under ``contract``."""
    out = []
    for i, text in enumerate(texts):
        try:
            message_record(text, contract, MAX)
        except Invalid as exc:
            out.append(letter(text, str(exc), first_offset + i))
        else:
            raise AssertionError(f"{text!r} passed the contract: no dead letter")
    return out


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LakeflowHome]:
    """The raw table iot.sensor-readings (local catalog) of a stream whose schema file is broken (until
    :func:`fix_schema`)."""
    home = make_home(tmp_path)
    schema = tmp_path / "reading.schema.json"
    schema.write_text(broken_schema(tmp_path / "broken.json").read_text())
    home.env["TABLE_SCHEMA"] = str(schema)
    home.enter(monkeypatch)
    yield home


GOOD = readings("", 4, start_ms=1763683200000, seq_start=1000, seed=3)  # as devices send them: no run_id
for r in GOOD:
    del r["run_id"]
    r["humidity"] = r["humidity"] + 0.25  # a fraction: no integer
STILL_BAD = [b'{"sensor_id": "s-9", "seq": 1, "timestamp_ms": 1763683200000, "temperature": "warm", '
             b'"humidity": 40.5, "pressure": 1000.1, "location": "hall"}',          # breaks the fixed one too
             b'{"sensor_id": "s-9", "seq": 2, "timestamp_ms": 1763683200000, "temperature": 20, '
             b'"humidity": 40.5, "pressure": 1000.1}',                               # … for another reason
             b"not json", None, b"\xc3\x28{}"]


def fill(home: LakeflowHome, bucket: str = "2025-11-21--00") -> tuple[list[dict], list[str], set[int]]:
    """Two dead-letter files with the broken schema's reasons: the good readings (with an undeclared field,
    numbers as sent) and the still-bad messages. Returns the letters, the good records as the job writes
    them, and the good letters' offsets."""
    broken = RecordContract(load_schema(broken_schema(home.home.parent / "broken.json")).contract())
    sent = [json.dumps({**r, "firmware": "2.1"}).encode() for r in GOOD]
    sent[0] = sent[0].replace(b'"pressure": ', b'"pressure": 1.0E3, "pressure_raw": ')  # number text kept
    first = messages(broken, sent[:3] + STILL_BAD[:2], 100)
    second = messages(broken, [sent[3], *STILL_BAD[2:]], 200)
    dead_letter_file(home.raw, bucket, first, "part-a1-0-0.json")
    dead_letter_file(home.raw, bucket, second, "part-a1-1-0.json")
    (home.raw / "_dead_letters" / bucket / ".part-a1-0-1.json.inprogress.77").write_text('[{"reason": "x"')
    fixed = RecordContract(load_schema().contract())
    return first + second, [message_record(m, fixed, MAX) for m in sent], {100, 101, 102, 200}


def fix_schema(home: LakeflowHome) -> None:
    Path(home.env["TABLE_SCHEMA"]).write_text(DEFAULT.read_text())


def storage(home: LakeflowHome) -> Storage:
    return Storage(home.raw.as_uri())


def stream():
    return chosen_stream(load_settings(), None)


def replay_parts(home: LakeflowHome) -> dict[str, list[str]]:
    """The raw table's replayed part files: path → its records (one per line)."""
    out = {}
    for path in sorted(home.raw.rglob("part-replay-*")):
        rel = path.relative_to(home.raw).as_posix()
        assert is_committed_part(rel), rel
        text = path.read_text()
        assert text.startswith("[") and text.endswith("]\n")
        out[rel] = [line.rstrip(",") for line in text[1:-2].split("\n")]
    return out


def snapshot(home: LakeflowHome) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in (home.raw / "_dead_letters").rglob("*") if p.is_file()}


def letters_left(home: LakeflowHome) -> list[dict]:
    return [x for p in sorted((home.raw / "_dead_letters").glob("*/part-*.json")) for x in json.loads(p.read_text())]


# --- counting -----------------------------------------------------------------------------------------

def test_list_counts_the_committed_dead_letters_by_reason(home: LakeflowHome, capsys: pytest.CaptureFixture) -> None:
    letters, _, _ = fill(home, "2025-11-21--00")
    dead_letter_file(home.raw, "2025-11-22--07", [letter(b"[1]", "not a JSON object: an array", 7)])
    tally = count(storage(home), stream())
    assert tally.letters == len(letters) + 1 and tally.files == 3           # the in-progress file is not counted
    assert tally.reasons == {OLD_REASON: 5, "field temperature: expected a number, got a string": 1,
                             "no value (a tombstone)": 1, "not JSON: 'utf-8' codec can't decode byte 0xc3 in position "
                             "0: invalid continuation byte": 1, "not JSON: Expecting value: line 1 column 1 (char 0)": 1,
                             "not a JSON object: an array": 1}
    assert (tally.oldest, tally.newest) == ("2025-11-21--00", "2025-11-22--07")

    assert main(["dead-letters", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["stream", "letters", "files", "oldest", "bucket", "newest", "bucket", "reason"]
    assert lines[1].split() == ["sensor-readings", "10", "3", "2025-11-21--00", "2025-11-22--07", "(every", "reason)"]
    assert lines[2].split(None, 1) == ["5", OLD_REASON]
    assert main(["dead-letters", "list", "--json", "--stream", "sensor-readings"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["streams"]
    assert row["letters"] == 10 and row["reasons"] == tally.reasons and row["pending_replays"] == 0


def test_list_over_a_pipeline_tells_each_stream(tmp_path: Path, home: LakeflowHome, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture) -> None:
    from lakeflow.catalog.local import LocalCatalog

    pipeline = tmp_path / "pipeline.toml"
    pipeline.write_text(f'[defaults]\nnamespace = "iot"\n\n[[streams]]\nname = "a"\ntopics = ["a"]\nschema = "{DEFAULT}"\n'
                        f'\n[[streams]]\nname = "b"\ntopics = ["b"]\nschema = "{DEFAULT}"\n')
    for key in ("TABLE", "TABLE_SCHEMA"):
        monkeypatch.delenv(key)
    monkeypatch.setenv("PIPELINE", str(pipeline))
    raw = Path(LocalCatalog(home.home).register(("iot",), "a").location.removeprefix("file://"))
    assert main(["dead-letters", "list"]) == 0
    assert capsys.readouterr().out.splitlines() == ["no dead letters (a, b)"]
    dead_letter_file(raw, "2025-11-21--03", [letter(None, "no value (a tombstone)", 1)])
    assert main(["dead-letters", "list"]) == 0
    lines = [line.split() for line in capsys.readouterr().out.splitlines()]
    assert lines[1:] == [["a", "1", "1", "2025-11-21--03", "2025-11-21--03", "(every", "reason)"],
                         ["1", "no", "value", "(a", "tombstone)"],
                         ["b", "0", "0", "-", "-", "(raw", "table", "iot.b", "not", "registered", "yet)"]]
    assert main(["dead-letters", "list", "--stream", "c"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"lakeflow dead-letters: no stream 'c' in {pipeline}: expected one of a, b"]


# --- replay ---------------------------------------------------------------------------------------------

def test_replay_lands_what_passes_once_and_keeps_the_rest_with_their_new_reason(
        home: LakeflowHome, capsys: pytest.CaptureFixture) -> None:
    letters, records, passing = fill(home)
    before = snapshot(home)
    assert main(["dead-letters", "replay", "--stream", "sensor-readings"]) == 0   # the schema is not fixed yet
    assert "replayed 0 letter(s)" in capsys.readouterr().out
    assert snapshot(home) == before  # nothing rewritten

    fix_schema(home)
    assert main(["dead-letters", "replay", "--stream", "sensor-readings", "--dry-run"]) == 0
    assert "would replay 4 letter(s) as records" in capsys.readouterr().out
    assert snapshot(home) == before and not replay_parts(home)

    assert main(["dead-letters", "replay", "--stream", "sensor-readings", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["replayed_by_reason"] == {OLD_REASON: 4} and report["kept"] == 5
    assert report["reasons_changed"] == 1                                          # the one now missing location
    assert report["kept_by_reason"] == {  # the fixed schema's reasons
        "field temperature: expected a number, got a string": 1, "missing field location": 1,
        "no value (a tombstone)": 1, "not JSON: Expecting value: line 1 column 1 (char 0)": 1,
        "not JSON: 'utf-8' codec can't decode byte 0xc3 in position 0: invalid continuation byte": 1}
    parts = replay_parts(home)
    assert sorted(parts.values()) == sorted([records[:3], records[3:]])              # one part file per letters file
    now = bucket_name(datetime.now(timezone.utc))
    assert all(p.split("/")[0] in (now, bucket_name(datetime.now(timezone.utc) - HOUR)) for p in parts)
    assert '"pressure":1.0E+3' in records[0] and '"firmware":"2.1"' in records[0]    # whole, numbers as sent
    left = letters_left(home)
    assert [x["offset"] for x in left] == [x["offset"] for x in letters if x["offset"] not in passing]
    assert left[1] == {**letters[4], "reason": "missing field location"}              # its new reason
    assert left[-1] == letters[-1] and left[-1].keys() == {"reason", "topic", "partition", "offset", "payload_base64"}  # kept as they were
    assert not (home.raw / REPLAY_DIR).exists() or not list((home.raw / REPLAY_DIR).iterdir())

    assert main(["dead-letters", "replay", "--stream", "sensor-readings"]) == 0    # a rerun: nothing new
    out = capsys.readouterr().out
    assert "replayed 0 letter(s)" in out and "kept 5 dead letter(s):" in out and "new reason" not in out
    assert replay_parts(home) == parts and letters_left(home) == left


def test_a_replay_empties_and_deletes_a_file_whose_letters_all_pass(home: LakeflowHome) -> None:
    fill(home)
    fix_schema(home)
    only = dead_letter_file(home.raw, "2025-11-23--05", [letter(json.dumps(GOOD[0]).encode(), OLD_REASON, 1)])
    report = replay_into(storage(home), stream(), MAX)
    assert f"_dead_letters/2025-11-23--05/{only.name}" in report.deleted and not only.parent.exists()
    assert sum(report.replayed.values()) == 5 and len(report.parts) == 3


class Crash(Exception):
    """The process dies here."""


CRASH_POINTS = ("after-staging", "after-rewriting", "after-publishing")


def crashed_replay(home: LakeflowHome, monkeypatch: pytest.MonkeyPatch, point: str) -> None:
    """A replay that dies at ``point`` (in its first dead-letter file)."""

    def crash(*args: object) -> None:
        raise Crash()

    delete = Storage.delete

    def crash_on_staged(self: Storage, rel: str) -> None:
        if rel.startswith(REPLAY_DIR):
            raise Crash()
        delete(self, rel)

    with monkeypatch.context() as m:
        if point == "after-staging":      # the records staged; the dead letters not rewritten yet
            m.setattr(dead_letters, "_rewrite", crash)
        elif point == "after-rewriting":  # the dead letters rewritten; the records not published yet
            m.setattr(dead_letters, "publish", crash)
        else:                             # the records published; the staged file still there
            m.setattr(Storage, "delete", crash_on_staged)
        with pytest.raises(Crash):
            replay_into(storage(home), stream(), MAX)


@pytest.mark.parametrize("point", CRASH_POINTS)
def test_a_crashed_replay_is_finished_by_the_next_and_its_records_land_once(
        point: str, home: LakeflowHome, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    letters, records, passing = fill(home)
    fix_schema(home)
    crashed_replay(home, monkeypatch, point)
    assert len(list((home.raw / REPLAY_DIR).iterdir())) == 1

    assert main(["dead-letters", "list"]) == 0                                    # the list tells of it
    assert "1 interrupted replay(s)" in capsys.readouterr().out
    assert main(["dead-letters", "replay", "--stream", "sensor-readings", "--dry-run"]) == 0
    assert "would finish 1 interrupted replay(s) first" in capsys.readouterr().out
    later = datetime.now(timezone.utc) + 3 * HOUR                                 # the rerun, hours later
    report = replay_into(storage(home), stream(), MAX, now=later)
    assert len(report.finished) == 1 and not list((home.raw / REPLAY_DIR).iterdir())
    report = replay_into(storage(home), stream(), MAX, now=later + HOUR)          # and once more
    assert report.parts == [] and report.finished == [] and sum(report.replayed.values()) == 0

    parts = replay_parts(home)
    assert sorted(r for rs in parts.values() for r in rs) == sorted(records)     # every record, exactly once
    assert len(parts) == 2
    in_rerun_hour = sum(p.startswith(bucket_name(later)) for p in parts)
    assert in_rerun_hour == (1 if point == "after-publishing" else 2)  # (else published by the rerun, in its hour)
    assert [x["offset"] for x in letters_left(home)] == [x["offset"] for x in letters if x["offset"] not in passing]


def test_a_file_another_replay_is_at_is_left_alone(home: LakeflowHome, monkeypatch: pytest.MonkeyPatch) -> None:
    fill(home)
    fix_schema(home)
    monkeypatch.setattr(dead_letters, "staged_files", lambda storage: [])  # the other replay's staging appears late
    plan = dead_letters.plan(dead_letters.read_letters("_dead_letters/2025-11-21--00/part-a1-0-0.json", (
        home.raw / "_dead_letters/2025-11-21--00/part-a1-0-0.json").read_bytes()), RecordContract(
        load_schema().contract()), MAX)
    storage(home).create(f"{REPLAY_DIR}/{plan.file.token}.json", plan.staged().model_dump_json().encode())
    report = replay_into(storage(home), stream(), MAX)
    assert report.busy == ["_dead_letters/2025-11-21--00/part-a1-0-0.json"] and len(report.parts) == 1


def test_replay_tells_what_it_cannot_do_in_one_line(home: LakeflowHome, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture) -> None:
    assert main(["dead-letters", "replay", "--stream", "sensor-readings"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"stream sensor-readings (raw table iot.sensor-readings): no dead letters in {home.raw.as_uri()}/_dead_letters"]
    assert main(["dead-letters", "replay", "--stream", "nope"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "lakeflow dead-letters: no stream 'nope' in the settings: expected one of sensor-readings"]
    with pytest.raises(SystemExit) as exited:
        main(["dead-letters", "replay"])                                          # --stream is required
    assert exited.value.code == 2
    capsys.readouterr()

    fill(home)
    fix_schema(home)
    bad = dead_letter_file(home.raw, "2025-11-21--01", [{"topic": "t"}], "part-b-0-0.json")
    assert main(["dead-letters", "replay", "--stream", "sensor-readings"]) == 2   # replayed the others, told of it
    out = capsys.readouterr().out
    assert "replayed 4 letter(s)" in out
    assert "  unreadable: _dead_letters/2025-11-21--01/part-b-0-0.json: letter 0: reason: Field required" in out
    assert bad.exists()

    def unreachable(self: Storage, rel: str = "") -> list:
        raise OSError("When listing objects under key 'x': AWS Error ACCESS_DENIED")

    monkeypatch.setattr(Storage, "list", unreachable)
    assert main(["dead-letters", "replay", "--stream", "sensor-readings"]) == 2   # storage failing: one line
    assert capsys.readouterr().err.splitlines() == [
        f"lakeflow dead-letters: replaying {home.raw.as_uri()}/_dead_letters: When listing objects under key 'x': "
        "AWS Error ACCESS_DENIED"]


def test_an_unregistered_raw_table_has_no_dead_letters(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture) -> None:
    home = make_home(tmp_path)
    home.env["TABLE"] = "elsewhere"
    home.enter(monkeypatch)
    assert main(["dead-letters", "replay", "--stream", "elsewhere"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "stream elsewhere (raw table iot.elsewhere): no dead letters: the raw table is not registered yet"]


# --- then the compaction --------------------------------------------------------------------------------

def compact(home: LakeflowHome, *args: str) -> dict:
    """One run of jobs/compact.py (arrow engine) in this process; its JSON report."""
    report = home.home.parent / f"report-{uuid.uuid4()}.json"
    assert compaction_pipeline()(load_config(job_options(["--engine", "arrow", "--report", str(report), *args]))) == 0
    return json.loads(report.read_text())


@pytest.mark.parametrize("point", [None, *CRASH_POINTS])
def test_the_compaction_takes_the_replayed_records_once(point: str | None, home: LakeflowHome,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    fix_schema(home)
    now = datetime.now(timezone.utc)
    ingested = readings("", 20, start_ms=int((now - 2 * HOUR).timestamp() * 1000), seed=1)
    for r in ingested:
        r.pop("run_id")
    write_parts(home.raw, ingested, 10, bucket_folders=True)
    assert compact(home)["rows_out"] == 20                                        # the table, and its ledger
    _, records, _ = fill(home)
    if point is None:
        replay_into(storage(home), stream(), MAX)
    else:
        crashed_replay(home, monkeypatch, point)
        if point == "after-publishing":  # compacted before the rerun: the ledger holds the file by its path
            assert compact(home)["files_in"] == 1
        replay_into(storage(home), stream(), MAX, now=now + HOUR)
    report = compact(home)
    assert report["files_in"] + (point == "after-publishing") == 2
    rows = home.iceberg_table().scan().to_arrow()
    assert rows.num_rows == 20 + len(records)
    assert sorted(rows.column("seq").to_pylist()) == sorted([r["seq"] for r in ingested] + [r["seq"] for r in GOOD])
    again = compact(home)
    assert again["files_in"] == 0 and home.iceberg_table().scan().to_arrow().num_rows == 20 + len(records)
    assert replay_into(storage(home), stream(), MAX).parts == []                  # nothing to replay any more
