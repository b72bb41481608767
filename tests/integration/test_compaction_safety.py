"""What a second compactor, a forged file or an early delete can do to committed data: nothing.

Recovery acts only on valid intents of runs that can no longer commit and never deletes a file a
snapshot references; the lease excludes a second run on any host (conditional creates on local
disks and on S3); every commit asserts the snapshot it was planned on; ``--delete-source`` keeps
raw files Flink may still re-commit. Real files, real pyiceberg (SQLite), moto's S3 server, and
``lakeflow compact`` processes (arrow engine) for the end-to-end cases.

The unit tests (no process): tests/unit/test_compaction_safety.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from lakeflow.compaction.files import Storage
from lakeflow.compaction.lease import LEASE_DIR, CompactionBusy, Lease
from lakeflow.compaction.naming import STATE_DIR
from tests.support.fixtures_compaction import LakeflowHome, make_home, readings, write_parts
from tests.support.fixtures_servers import MotoServer
from tests.unit.test_compaction_safety import DAY_MS  # noqa: F401 (fixtures, constants)

TARGET = "sensor-readings-compacted"


def test_a_dead_holder_on_this_host_frees_the_lease_at_once(tmp_path: Path) -> None:
    storage = Storage((tmp_path / "t").as_uri())
    code = ("import sys, os; from lakeflow.compaction.lease import Lease; from lakeflow.compaction.files import "
            f"Storage; Lease(Storage({storage.location!r}), 'crashed', 'iot.t', 600).acquire(); os._exit(9)")
    assert subprocess.run([sys.executable, "-c", code], timeout=60).returncode == 9
    with Lease(storage, "me", "iot.t", ttl_s=30) as lease:  # not 600 s later
        assert lease.generation == 2


@pytest.fixture
def compacted(tmp_path: Path) -> LakeflowHome:
    home = make_home(tmp_path)
    home.env["COMPACT_ENGINE"] = "arrow"
    write_parts(home.raw, readings("run-a", 300, start_ms=DAY_MS, seed=1), 25)
    done = home.compact()
    assert done.returncode == 0, done.stderr[-3000:]
    return home


def _files(home: LakeflowHome) -> list[str]:
    """The Iceberg table's data and metadata files (not the compactor's bookkeeping)."""
    return sorted(str(p) for p in (home.home / "iceberg").rglob("*") if p.is_file() and "_lakeflow" not in p.parts)


@pytest.mark.slow
def test_a_forged_intent_in_the_raw_table_deletes_nothing(compacted: LakeflowHome) -> None:
    """The reproduced defect: an intent written into the raw table's folder (writable by the
    ingestion job's credentials) made the next run delete the whole Iceberg table."""
    home = compacted
    rows = home.iceberg_table(TARGET).scan().to_arrow().num_rows
    files = _files(home)
    forged = b'{"run_id":"x","staging":"","records":""}'
    for folder in (home.raw / "_lakeflow" / "compaction" / f"iot.{TARGET}",):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "intent-x.json").write_bytes(forged)
    write_parts(home.raw, readings("run-b", 50, start_ms=DAY_MS + 10_000_000, seed=2), 25)
    done = home.compact()
    assert done.returncode == 0, done.stderr[-3000:]
    assert home.iceberg_table(TARGET).scan().to_arrow().num_rows == rows + 50
    assert set(files) <= set(_files(home)), "a committed file was deleted"


@pytest.mark.slow
def test_a_forged_intent_in_the_table_is_reported_and_set_aside(compacted: LakeflowHome) -> None:
    home = compacted
    table = home.iceberg_table(TARGET)
    state = Path(table.location().removeprefix("file://")) / STATE_DIR
    (state / "intent-x.json").write_bytes(b'{"run_id":"x","staging":"","records":""}')
    files = _files(home)
    done = home.compact()
    assert done.returncode == 0, done.stderr[-3000:]
    assert "set aside an invalid intent, not acted on" in done.stdout
    assert set(files) <= set(_files(home))
    assert (state / "rejected" / "intent-x.json").is_file()
    again = home.compact()
    assert again.returncode == 0 and "invalid intent" not in again.stdout


@pytest.mark.slow
def test_delete_source_keeps_raw_files_flink_may_still_recommit(tmp_path: Path) -> None:
    home = make_home(tmp_path)
    home.env["COMPACT_ENGINE"] = "arrow"
    parts = write_parts(home.raw, readings("run-a", 100, start_ms=DAY_MS, seed=1), 25)
    old = time.time() - 3600
    os.utime(parts[0], (old, old))                   # committed an hour ago
    done = home.compact("--delete-source")            # default minimum age: 15 minutes
    assert done.returncode == 0, done.stderr[-3000:]
    assert [p.exists() for p in parts] == [False, True, True, True]
    done = home.compact("--delete-source", "--delete-min-age", "0s")
    assert done.returncode == 0 and not any(p.exists() for p in parts)
    assert home.iceberg_table(TARGET).scan().to_arrow().num_rows == 100
    bad = home.compact("--delete-source", "--delete-min-age", "soon")
    assert bad.returncode == 2 and "COMPACT_DELETE_MIN_AGE='soon'" in bad.stderr


@pytest.mark.slow
def test_two_compactors_on_two_hosts_lose_double_and_delete_nothing(tmp_path: Path) -> None:
    """``make chaos``'s two-compactors scenario, shortened: separate processes and homes, same tables."""
    from tests.chaos.compaction_faults import two_compactors

    result = two_compactors(tmp_path, rounds=3, seed=7)
    assert result.ok, result.line()
    assert result.counts["rows"] == 3 * 120


def test_delete_many_deletes_in_batches_and_leaves_no_empty_folders(lease_storage: Storage,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Retention and maintenance delete through ``delete_many``: on S3 in DeleteObjects requests of
    ``DELETE_BATCH`` keys (1,000; 4 here), a missing key no error (moto's server); local folders left
    empty go, a folder still holding a file stays."""
    from lakeflow.compaction import files

    monkeypatch.setattr(files, "DELETE_BATCH", 4)
    storage = lease_storage
    rels = [f"2025-11-21--{n % 3:02d}/part-a-0-{n}.json" for n in range(10)]
    for rel in [*rels, "2025-11-21--02/keep.json"]:
        storage.write(rel, b"[]")
    calls: list[int] = []
    if not storage.is_local:
        storage._s3().meta.events.register("provide-client-params.s3.DeleteObjects",
                                           lambda params, **_: calls.append(len(params["Delete"]["Objects"])))
    storage.delete_many([*rels, "2025-11-21--00/never-written.json"])
    assert [e.rel for e in storage.list()] == ["2025-11-21--02/keep.json"]
    if storage.is_local:
        root = Path(storage.location.removeprefix("file://"))
        assert sorted(p.name for p in root.iterdir()) == ["2025-11-21--02"]
    else:
        assert calls == [4, 4, 3]


def test_conditional_create_lets_one_writer_win(lease_storage: Storage) -> None:
    assert lease_storage.create("x/one.json", b"a") is True
    assert lease_storage.create("x/one.json", b"b") is False
    assert lease_storage.read("x/one.json") == b"a"


def test_the_lease_excludes_a_second_run_until_released(lease_storage: Storage) -> None:
    with Lease(lease_storage, "run-1", "iot.t", ttl_s=30):
        with pytest.raises(CompactionBusy, match=r"another compaction of iot.t is running \(run run-1, pid \d+"):
            Lease(lease_storage, "run-2", "iot.t", ttl_s=30).acquire()
    with Lease(lease_storage, "run-3", "iot.t", ttl_s=30) as lease:
        assert lease.generation >= 3
    assert len(lease_storage.list(LEASE_DIR)) == 1  # older generations pruned


@pytest.fixture(params=["file", "s3"])
def lease_storage(request: pytest.FixtureRequest, tmp_path: Path) -> Storage:
    if request.param == "file":
        return Storage((tmp_path / "t").as_uri())
    return _s3_storage(request.getfixturevalue("moto_server"), f"lease-{uuid.uuid4().hex[:12]}")


def _s3_storage(moto: MotoServer, bucket: str) -> Storage:
    moto.client("s3").create_bucket(Bucket=bucket)
    return Storage(f"s3://{bucket}/warehouse/t", {"s3.endpoint": moto.url, "s3.access-key-id": "bootstrap",
                                                  "s3.secret-access-key": "bootstrap", "s3.region": "us-east-1",
                                                  "s3.path-style-access": "true"})
