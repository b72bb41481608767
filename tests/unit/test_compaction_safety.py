"""What a second compactor, a forged file or an early delete can do to committed data: nothing.

Unit tests: they start no process. The real-process tests: tests/integration/test_compaction_safety.py."""

from __future__ import annotations

import json
import os
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from lakeflow.compaction.commit import CommitConflict, Target, commit, iceberg_catalog, open_target
from lakeflow.compaction.files import Storage
from lakeflow.compaction.lease import LEASE_DIR, CompactionBusy, Lease, LeaseLost
from lakeflow.compaction.ledger import Ledger
from lakeflow.compaction.naming import STATE_DIR, final_paths, intent_name
from lakeflow.compaction.recovery import REJECTED_DIR, Intent, InvalidIntent, recover, save_intent
from lakeflow.compaction.rows import WrittenFile
from lakeflow.schema import load_schema
from lakeflow.settings import load_settings
from tests.support.fixtures_compaction import written_file

DAY_MS = 1763683200000  # 2025-11-21T00:00:00Z


def _run_id() -> str:
    return str(uuid.uuid4())


def _target(tmp_path: Path) -> Target:
    settings = load_settings({"LAKEFLOW_HOME": str(tmp_path / "home"), "LAKEFLOW_ENV_FILE": str(tmp_path / "no.env")})
    return open_target(iceberg_catalog(settings), ("iot",), "t", (tmp_path / "raw").as_uri(), load_schema())


def _data_file(target: Target, rel: str, seq: int):
    """A one-row data file of the table at ``rel``, as the engines write it: (URI, WrittenFile)."""
    row = {"sensor_id": "s", "run_id": "r", "seq": seq, "timestamp_ms": DAY_MS + seq, "temperature": 1.0,
           "humidity": 2.0, "pressure": 3.0, "location": "lab"}
    return written_file(target, [row], rel, tag=f"t{seq}")


def _name(run_id: str, n: int = 1) -> str:

    day = WrittenFile("x", (20413,), "ts_day=2025-11-21", 1, 1, DAY_MS + n, DAY_MS + n, {})
    return final_paths([day], "t", n, run_id)[0]


@pytest.mark.parametrize("body, why", [
    (b'{"run_id":"x","staging":"","records":""}', "expected the fields"),            # the reproduced forgery
    (b"not json", "not JSON"),
    (b"[" * 100_000, "not JSON"),                                                    # deeply nested
    (json.dumps({"run_id": "x", "planned_snapshot": None, "data_files": [], "previous_ledger": ""}).encode(),
     "is not a run id"),
    (json.dumps({"run_id": "0b6a3f3e-5c2d-4f7e-9a1b-2c3d4e5f6a7b", "planned_snapshot": None,
                 "data_files": ["metadata/v1.metadata.json"], "previous_ledger": ""}).encode(), "not all named by run"),
    (json.dumps({"run_id": "0b6a3f3e-5c2d-4f7e-9a1b-2c3d4e5f6a7b", "planned_snapshot": None,
                 "data_files": ["data/ts_day=2025-11-21/../../metadata/x__0b6a3f3e-5c2d-4f7e-9a1b-2c3d4e5f6a7b.parquet"],
                 "previous_ledger": ""}).encode(), "not all named by run"),
    (json.dumps({"run_id": "0b6a3f3e-5c2d-4f7e-9a1b-2c3d4e5f6a7b", "planned_snapshot": None, "data_files": [],
                 "previous_ledger": "metadata"}).encode(), "not a ledger path"),
])
def test_invalid_intents_are_refused(body: bytes, why: str) -> None:
    with pytest.raises(InvalidIntent, match=why):
        Intent.from_bytes(body)


def test_forged_intents_are_set_aside_and_nothing_is_deleted(tmp_path: Path) -> None:
    target, raw = _target(tmp_path), Storage((tmp_path / "raw").as_uri())
    run = _run_id()
    ours = _name(run)
    commit(target, [_data_file(target, ours, 1)], target.storage.uri(f"{STATE_DIR}/ledger-{run}.json.gz"),
           raw.location, run, {}, load_schema())
    before = sorted(e.rel for e in target.storage.list())
    target.storage.write(f"{STATE_DIR}/intent-x.json", b'{"run_id":"x","staging":"","records":""}')
    other = _run_id()  # valid, but filed under another run's name
    target.storage.write(intent_name(run), Intent(other, None).to_bytes())

    done = recover(target, Ledger())
    assert len(done.intents_rejected) == 2 and done.orphans_removed == 0
    after = sorted(e.rel for e in target.storage.list())
    assert [r for r in after if not r.startswith(REJECTED_DIR)] == [r for r in before]
    assert sorted(r.rsplit("/", 1)[-1] for r in after if r.startswith(REJECTED_DIR)) == sorted(
        [f"intent-{run}.json", f"intent-{run}.json.reason.json", "intent-x.json", "intent-x.json.reason.json"])
    assert recover(target, Ledger()).intents_rejected == []  # set aside once, not reported forever


def test_a_referenced_file_is_never_deleted(tmp_path: Path) -> None:
    """An uncommitted run's intent naming a file a snapshot references (however it got there): kept."""
    target, raw = _target(tmp_path), Storage((tmp_path / "raw").as_uri())
    dead = _run_id()
    shared, orphan = _name(dead, 1), _name(dead, 2)
    save_intent(target.storage, Intent(dead, None, (shared, orphan)))
    _data_file(target, orphan, 2)
    commit(target, [_data_file(target, shared, 1)], target.storage.uri(f"{STATE_DIR}/ledger-x.json.gz"),
           raw.location, _run_id(), {}, load_schema())

    done = recover(target, Ledger())
    assert done.orphans_removed == 1
    assert target.storage.exists(shared) and not target.storage.exists(orphan)
    assert not target.storage.exists(intent_name(dead))
    assert target.table.scan().to_arrow().num_rows == 1


def test_a_run_that_could_still_commit_keeps_its_files_until_the_table_moves(tmp_path: Path) -> None:
    target, raw = _target(tmp_path), Storage((tmp_path / "raw").as_uri())
    slow = _run_id()  # e.g. a compactor paused past its lease: its commit would still pass
    mine = _name(slow)
    save_intent(target.storage, Intent(slow, target.snapshot_id, (mine,)))
    _data_file(target, mine, 1)
    assert recover(target, Ledger()).runs_deferred == 1 and target.storage.exists(mine)

    commit(target, [], target.storage.uri(f"{STATE_DIR}/ledger-y.json.gz"), raw.location, _run_id(), {}, load_schema())
    done = recover(target, Ledger())  # its commit would now fail: its files are orphans
    assert (done.runs_deferred, done.orphans_removed) == (0, 1) and not target.storage.exists(mine)


def test_recovery_removes_an_uncommitted_runs_quarantine_under_the_table_only(tmp_path: Path) -> None:
    """The quarantine is the Iceberg table's: an uncommitted run's bad records and copies of bad files
    go with its other files, a committed run's stay, and the raw table is not touched."""
    target, raw = _target(tmp_path), Storage((tmp_path / "raw").as_uri())
    raw.write("2025-11-21--00/part-a-0-0.json", b"[{")
    dead, done = Intent(_run_id(), None), Intent(_run_id(), None)
    for intent in (dead, done):
        target.storage.write(f"{intent.records}/part-00000.json", b'{"file": "x", "reason": "r", "record": "{}"}\n')
        target.storage.write(f"{intent.quarantined_files}/2025-11-21--00/part-a-0-0.json", b"[{")
    save_intent(target.storage, dead)
    commit(target, [], target.storage.uri(f"{STATE_DIR}/ledger-{done.run_id}.json.gz"), raw.location, done.run_id,
           {}, load_schema())
    before = raw.list()

    recover(target, Ledger())
    assert {e.rel for e in target.storage.list("_lakeflow/quarantine")} == {
        f"{done.records}/part-00000.json", f"{done.quarantined_files}/2025-11-21--00/part-a-0-0.json"}
    assert dead.records.startswith("_lakeflow/quarantine/records/run=") and not target.storage.exists(
        intent_name(dead.run_id))
    assert raw.list() == before


def test_a_committed_run_only_loses_its_leftovers_never_the_current_ledger(tmp_path: Path) -> None:
    target, raw = _target(tmp_path), Storage((tmp_path / "raw").as_uri())
    run = _run_id()
    ledger = f"{STATE_DIR}/ledger-{run}.json.gz"
    target.storage.write(ledger, Ledger().to_bytes())
    target.storage.write(f"data/_staging/{run}/ts_day=2025-11-21/part-0.parquet", b"x")
    data = _name(run)
    commit(target, [_data_file(target, data, 1)], target.storage.uri(ledger), raw.location, run, {}, load_schema())
    # a (crafted) intent of that run naming the current ledger as the one it replaced
    save_intent(target.storage, Intent(run, None, (data,), previous_ledger=ledger))
    recover(target, Ledger())
    assert target.storage.exists(ledger) and target.storage.exists(data)
    assert target.storage.list("data/_staging") == [] and not target.storage.exists(intent_name(run))


def test_ledger_only_commits_conflict_too(tmp_path: Path) -> None:
    """Two runs planned on one snapshot that both only consumed bad files: the second must fail,
    or the first run's ledger entries would be lost (its files compacted again)."""
    target = _target(tmp_path)
    first, second = target, _target(tmp_path)
    source = (tmp_path / "raw").as_uri()
    commit(first, [], target.storage.uri(f"{STATE_DIR}/ledger-a.json.gz"), source, "run-a", {}, load_schema())
    with pytest.raises(CommitConflict, match="changed while this run worked"):
        commit(second, [], target.storage.uri(f"{STATE_DIR}/ledger-b.json.gz"), source, "run-b", {}, load_schema())
    assert _target(tmp_path).ledger_pointer.endswith("ledger-a.json.gz")


def _foreign_holder(storage: Storage, expires: datetime, host: str = "another-host") -> None:
    body = {"run_id": "run-x", "host": host, "pid": 1, "boot_id": "b", "expires_at": expires.isoformat(),
            "released": False}
    assert storage.create(f"{LEASE_DIR}/000000000007.json", json.dumps(body).encode())


def test_an_expired_lease_is_taken_over_and_a_live_one_is_not(tmp_path: Path) -> None:
    live, expired = Storage((tmp_path / "a").as_uri()), Storage((tmp_path / "b").as_uri())
    _foreign_holder(live, datetime.now(timezone.utc) + timedelta(minutes=5))
    _foreign_holder(expired, datetime.now(timezone.utc) - timedelta(seconds=1))
    with pytest.raises(CompactionBusy, match="run run-x, pid 1 on another-host"):
        Lease(live, "me", "iot.t", ttl_s=30).acquire()
    with Lease(expired, "me", "iot.t", ttl_s=30) as lease:
        assert lease.generation == 8


def test_the_holder_renews_its_lease_and_learns_when_it_lost_it(tmp_path: Path) -> None:
    storage = Storage((tmp_path / "t").as_uri())
    with Lease(storage, "me", "iot.t", ttl_s=3) as lease:
        time.sleep(4.5)  # past the first expiry: renewed every second
        with pytest.raises(CompactionBusy, match=r"^another compaction of iot\.t is running \(run me, pid \d+ on "):
            Lease(storage, "other", "iot.t", ttl_s=3).acquire()
        assert lease.generation >= 3
        lease.check()
        assert storage.create(f"{LEASE_DIR}/{lease.generation + 1:012d}.json", b"{}")  # taken over
        time.sleep(1.5)
        with pytest.raises(LeaseLost, match="lease on iot.t was lost"):
            lease.check()


def test_bookkeeping_writes_are_synced_before_and_after_the_rename(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Ledger and intent writes survive a power cut: the data is synced before the atomic rename, the
    folder after it (a rename is durable only once its folder is)."""
    storage, synced = Storage((tmp_path / "t").as_uri()), []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        synced.append("dir" if os.path.isdir(f"/proc/self/fd/{fd}") else "file")
        real_fsync(fd)

    def replace(src: str, dst: str) -> None:
        synced.append("rename")
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    storage.write(f"{STATE_DIR}/ledger-x.json.gz", b"ledger")
    assert synced == ["file", "rename", "dir"]
    assert storage.read(f"{STATE_DIR}/ledger-x.json.gz") == b"ledger"
    assert [e.rel for e in storage.list()] == [f"{STATE_DIR}/ledger-x.json.gz"]  # no temporary file left
