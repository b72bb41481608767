"""``lakeflow maintain`` clears what killed Flink writers leave under the raw table — hidden in-progress
part files (``file://``, and any on S3) and open S3 multipart uploads — once they are older than
``COMPACT_LEFTOVER_MIN_AGE``; younger ones, committed part files and anything outside the table stay.

file:// runs the real command as a process on the embedded catalog. S3 runs the same step with the
raw table's vended credentials on moto with IAM enforced: refused to list uploads under the policy
the Lakekeeper stand-in vends by default (reported, not an error), allowed when the policy grants
``s3:ListBucketMultipartUploads``. (moto reports every upload as initiated 2010-11-10, so the age
rule on uploads is checked on a listing the test hands in, beside the real one.)

The unit tests (no process): tests/unit/test_leftovers.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import boto3
import pytest

from lakeflow.catalog import open_catalog
from lakeflow.compaction.config import MaintainOptions
from lakeflow.compaction.files import Storage
from lakeflow.compaction.maintain import MaintainReport, clear_leftovers
from lakeflow.credentials import VendedConfig, to_s3a
from lakeflow.settings import load_settings
from tests.standins.lakekeeper import S3Account
from tests.support.fixtures_compaction import json_array, make_home, readings, write_in_progress, write_parts
from tests.support.fixtures_lakekeeper import env_for, start_lakekeeper

LAKEFLOW = Path(sys.executable).parent / "lakeflow"


DAY_MS = 1763683200000  # 2025-11-21T00:00:00Z


HOUR = "2025-11-21--00"


TWO_DAYS_AGO = time.time() - 2 * 86400


def maintain_json(env: dict, cwd: Path, *args: str) -> dict:
    done = subprocess.run([str(LAKEFLOW), "maintain", "--json", *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_maintain_removes_old_in_progress_files_only(tmp_path: Path) -> None:
    home = make_home(tmp_path)
    bucket = home.raw / HOUR
    committed = write_parts(bucket, readings("run-1", 40, start_ms=DAY_MS), 10)
    old = [write_in_progress(bucket, readings("run-1", 5, start_ms=DAY_MS)) for _ in range(2)]
    old.append(write_in_progress(home.raw, readings("run-1", 5, start_ms=DAY_MS)))  # no bucket folder
    young = write_in_progress(bucket, readings("run-1", 5, start_ms=DAY_MS))
    for path in old + committed:
        os.utime(path, (TWO_DAYS_AGO, TWO_DAYS_AGO))

    planned = maintain_json(home.env, home.home, "--leftover-min-age", "1d", "--dry-run")
    assert (planned["in_progress_removed"], planned["in_progress_too_young"]) == (3, 1)
    assert all(p.exists() for p in [*old, young, *committed])                     # a dry run changes nothing

    done = maintain_json(home.env, home.home, "--leftover-min-age", "1d")
    assert (done["in_progress_removed"], done["in_progress_too_young"]) == (3, 1)
    assert (done["uploads_aborted"], done["uploads_unlisted"]) == (0, "")        # none on a local disk
    assert not any(p.exists() for p in old)
    assert young.exists() and all(p.exists() for p in committed)

    again = maintain_json(home.env, home.home, "--leftover-min-age", "1d")
    assert (again["in_progress_removed"], again["in_progress_too_young"]) == (0, 1)


@pytest.fixture
def raw_on_s3(moto_iam: S3Account, tmp_path: Path):
    """A Lakekeeper stand-in over moto (IAM enforced) and lakeflow's environment pointing at it."""
    standin = start_lakekeeper(moto_iam)
    try:
        env = env_for(standin, LAKEFLOW_HOME=str(tmp_path / "home"))
        yield standin, env
    finally:
        standin.stop()


def _vended(env: dict) -> tuple[str, dict]:
    settings = load_settings(env)
    with open_catalog(settings) as catalog:
        handle = catalog.load(settings.namespace, settings.table, vended=True)
    return handle.location, handle.storage.merged()


def _fill(admin: S3Account, location: str, vended: dict) -> tuple[str, str, str]:
    bucket, prefix = location.removeprefix("s3://").split("/", 1)
    writer = boto3.client("s3", **to_s3a(VendedConfig(location, vended)).boto3())   # as Flink's S3A writes
    writer.put_object(Bucket=bucket, Key=f"{prefix}/{HOUR}/part-w-0-0.json",
                      Body=json_array(readings("run-s3", 10, start_ms=DAY_MS)).encode())
    writer.put_object(Bucket=bucket, Key=f"{prefix}/{HOUR}/.part-w-1-0.json.inprogress.0a1b", Body=b"[")
    for n in range(2):
        upload = writer.create_multipart_upload(Bucket=bucket, Key=f"{prefix}/{HOUR}/part-w-{n}-1.json")
        writer.upload_part(Bucket=bucket, Key=f"{prefix}/{HOUR}/part-w-{n}-1.json", PartNumber=1,
                           UploadId=upload["UploadId"], Body=b"[" + b" " * 1024)
    other = admin.client("s3").create_multipart_upload(Bucket=bucket, Key="warehouse/other-table/part-x.json")
    return bucket, prefix, other["UploadId"]


def _open_uploads(admin: S3Account, bucket: str) -> set[str]:
    return {u["Key"] for u in admin.client("s3").list_multipart_uploads(Bucket=bucket).get("Uploads", [])}


@pytest.mark.slow
def test_s3_uploads_refused_to_list_are_reported_and_in_progress_objects_removed(raw_on_s3, moto_iam) -> None:
    standin, env = raw_on_s3
    settings = load_settings(env)
    open_catalog(settings).register(settings.namespace, settings.table)
    location, vended = _vended(env)
    bucket, prefix, _ = _fill(moto_iam, location, vended)

    report = MaintainReport(table="t")
    clear_leftovers(Storage(location, vended), MaintainOptions(leftover_min_age_s=0), report)
    assert report.uploads_unlisted.startswith("AccessDenied: ")
    assert "AbortIncompleteMultipartUpload" in report.uploads_unlisted
    assert (report.uploads_aborted, report.in_progress_removed) == (0, 1)
    assert len(_open_uploads(moto_iam, bucket)) == 3                               # nothing aborted
    keys = {o["Key"] for o in moto_iam.client("s3").list_objects_v2(Bucket=bucket, Prefix=prefix)["Contents"]}
    assert keys == {f"{prefix}/{HOUR}/part-w-0-0.json"}


@pytest.mark.slow
def test_s3_open_uploads_of_the_table_aborted(raw_on_s3, moto_iam) -> None:
    standin, env = raw_on_s3
    standin.vend_upload_listing = True
    settings = load_settings(env)
    open_catalog(settings).register(settings.namespace, settings.table)
    location, vended = _vended(env)
    bucket, prefix, other = _fill(moto_iam, location, vended)
    raw = Storage(location, vended)
    assert {u.rel for u in raw.open_uploads()} == {f"{HOUR}/part-w-0-1.json", f"{HOUR}/part-w-1-1.json"}

    planned = MaintainReport(table="t", dry_run=True)
    clear_leftovers(raw, MaintainOptions(leftover_min_age_s=0, dry_run=True), planned)
    assert (planned.uploads_aborted, planned.in_progress_removed) == (2, 1) and len(_open_uploads(moto_iam, bucket)) == 3

    report = MaintainReport(table="t")
    clear_leftovers(raw, MaintainOptions(leftover_min_age_s=0), report)
    assert (report.uploads_aborted, report.in_progress_removed, report.uploads_unlisted) == (2, 1, "")
    assert _open_uploads(moto_iam, bucket) == {"warehouse/other-table/part-x.json"}  # not this table's
    assert raw.open_uploads() == []
    keys = {o["Key"] for o in moto_iam.client("s3").list_objects_v2(Bucket=bucket, Prefix=prefix)["Contents"]}
    assert keys == {f"{prefix}/{HOUR}/part-w-0-0.json"}                            # the committed file stays
    moto_iam.client("s3").abort_multipart_upload(Bucket=bucket, Key="warehouse/other-table/part-x.json",
                                                 UploadId=other)
