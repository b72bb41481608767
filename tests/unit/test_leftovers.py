"""``lakeflow maintain`` clears what killed Flink writers leave under the raw table — hidden in-progress
part files (``file://``, and any on S3) and open S3 multipart uploads — once they are older than
``COMPACT_LEFTOVER_MIN_AGE``; younger ones, committed part files and anything outside the table stay.

Unit tests: they start no process. The real-process tests: tests/integration/test_leftovers.py."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

from lakeflow.compaction.files import Storage, Upload
from lakeflow.compaction.maintain import leftovers


def test_leftover_age_rule_on_uploads(tmp_path: Path) -> None:
    """The same cut-off for uploads, by their initiation time (what AWS reports and moto does not)."""
    now = datetime.now(timezone.utc)
    found = [Upload("2025-11-21--00/part-a-0-1.json", "u1", now - timedelta(hours=25)),
             Upload("2025-11-21--00/part-a-1-1.json", "u2", now - timedelta(hours=23)),
             Upload("part-b-0-0.json", "u3", now - timedelta(seconds=5))]
    storage = Storage(tmp_path.as_uri())
    uploads, young, files, young_files = leftovers(storage, 86400, now, found)
    assert [u.upload_id for u in uploads] == ["u1"] and young == 2 and (files, young_files) == ([], 0)
