"""A run costs O(new buckets), not O(history): it lists the raw table's hour buckets of the look-back
window only and reads and writes the ledger segments of the buckets it touches. Late commits within
the look-back are picked up, older ones by ``--full-scan``; ledgers of before 0.3 are migrated; raw
retention deletes only files compacted long enough ago. In-process runs of jobs/compact.py (arrow
engine) on real files, with the storage's listings and reads counted.

The unit tests (no process): tests/unit/test_compaction_incremental.py.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from pathlib import Path

from lakeflow.compaction.discover import list_parts
from lakeflow.compaction.files import Storage
from tests.unit.test_compaction_incremental import HOUR_MS, START, bucket  # noqa: F401 (fixtures, constants)


def test_on_s3_a_run_lists_from_the_window_on_only(moto_server, tmp_path: Path) -> None:
    """On S3 the top is one delimiter listing starting after the window's first bucket (StartAfter):
    earlier buckets cost no request, however many there are (moto's server, requests counted)."""
    from lakeflow.compaction.discover import window_start

    s3 = moto_server.client("s3")
    name = f"raw-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=name)
    storage = Storage(f"s3://{name}/warehouse/raw", {"s3.endpoint": moto_server.url, "s3.access-key-id": "bootstrap",
                                                     "s3.secret-access-key": "bootstrap", "s3.region": "us-east-1",
                                                     "s3.path-style-access": "true"})
    for h in range(1010):                                             # > 1,000 buckets: more than a page
        s3.put_object(Bucket=name, Key=f"warehouse/raw/{bucket(h)}/part-a-0-{h}.json", Body=b"[]")
    s3.put_object(Bucket=name, Key="warehouse/raw/part-flat-0-0.json", Body=b"[]")
    s3.put_object(Bucket=name, Key="warehouse/raw/_quarantine/part-x-0-0.json", Body=b"[]")
    requests: list[dict] = []
    client = storage._s3()
    client.meta.events.register("provide-client-params.s3.ListObjectsV2", lambda params, **_: requests.append(params))
    since = window_start([bucket(h) for h in range(1009)], timedelta(hours=1))
    assert since == bucket(1007)
    listing = list_parts(storage, since)
    assert [f.rel for f in listing.parts] == [f"{bucket(h)}/part-a-0-{h}.json" for h in (1007, 1008, 1009)] + [
        "part-flat-0-0.json"]
    # one page of one delimiter listing (boto3) for the top, then the three buckets (pyarrow)
    assert [(r["Delimiter"], r["StartAfter"]) for r in requests] == [("/", f"warehouse/raw/{bucket(1007)}")]
    assert listing.requests == 1 + 3
    assert listing.covers(bucket(1008)) and not listing.covers(bucket(5)) and listing.covers("")
