"""``lakeflow maintain`` clears what killed Flink writers leave under the raw table — hidden in-progress
part files (``file://``, and any on S3) and open S3 multipart uploads — once they are older than
``COMPACT_LEFTOVER_MIN_AGE``; younger ones, committed part files and anything outside the table stay.

Unit tests: they start no process. The real-process tests: tests/integration/test_leftovers.py."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

from lakeflow.compaction.config import MaintainOptions
from lakeflow.compaction.files import Storage, StorageDenied, Upload
from lakeflow.compaction.maintain import MaintainReport, clear_leftovers, leftovers


def test_leftover_age_rule_on_uploads(tmp_path: Path) -> None:
    """The same cut-off for uploads, by their initiation time (what AWS reports and moto does not)."""
    now = datetime.now(timezone.utc)
    found = [Upload("2025-11-21--00/part-a-0-1.json", "u1", now - timedelta(hours=25)),
             Upload("2025-11-21--00/part-a-1-1.json", "u2", now - timedelta(hours=23)),
             Upload("part-b-0-0.json", "u3", now - timedelta(seconds=5))]
    storage = Storage(tmp_path.as_uri())
    uploads, young, files, young_files = leftovers(storage, 86400, now, found)
    assert [u.upload_id for u in uploads] == ["u1"] and young == 2 and (files, young_files) == ([], 0)


class ReadOnly(Storage):
    """A raw table whose credentials may read but not change it (the compaction's under least
    privilege): the storage refuses every abort and delete, as S3 answers AccessDenied."""

    def __init__(self, location: str, uploads: list[Upload]) -> None:
        super().__init__(location)
        self.uploads = uploads

    def open_uploads(self) -> list[Upload]:
        return self.uploads

    def abort_upload(self, upload: Upload) -> None:
        raise StorageDenied(f"abort {upload.rel}: AccessDenied", 1)

    def delete_many(self, rels) -> None:
        raise StorageDenied("DeleteObjects: AccessDenied", len(rels))


def test_leftovers_the_credentials_may_not_remove_are_reported_left(tmp_path: Path) -> None:
    """Read-only raw credentials: nothing removed, every old leftover counted as left, one line naming
    the principal and what to run instead — no error; the young ones are only too young."""
    now = datetime.now(timezone.utc)
    (tmp_path / "2025-11-21--00").mkdir()
    for name in (".part-a-0-1.json.inprogress.0a1b", ".part-a-1-1.json.inprogress.0c2d"):
        (tmp_path / "2025-11-21--00" / name).write_text("[")
    raw = ReadOnly(tmp_path.as_uri(), [Upload("2025-11-21--00/part-a-0-2.json", "u1", now - timedelta(hours=2)),
                                       Upload("2025-11-21--00/part-a-1-2.json", "u2", now)])
    report = MaintainReport(table="iot.t")
    clear_leftovers(raw, MaintainOptions(leftover_min_age_s=0), report, "ingest-bot")
    assert (report.uploads_aborted, report.in_progress_removed) == (0, 0)
    assert (report.uploads_denied, report.in_progress_denied, report.counts()["leftovers_denied"]) == (2, 2, 4)
    assert report.leftovers_denied == (
        f"4 left: ingest-bot may not delete in the raw table {raw.location}; run "
        "`lakeflow maintain --raw-leftovers-only` as a principal with modify on it (the ingestion's)")
    assert f"  {report.leftovers_denied}" in report.summary_lines()
    assert len(list((tmp_path / "2025-11-21--00").iterdir())) == 2

    young = MaintainReport(table="iot.t")
    clear_leftovers(raw, MaintainOptions(leftover_min_age_s=3 * 3600), young)
    assert (young.uploads_denied, young.in_progress_denied, young.leftovers_denied) == (0, 0, "")
    assert young.uploads_too_young + young.in_progress_too_young == 4
