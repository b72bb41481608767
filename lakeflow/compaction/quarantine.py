"""Bad input is set aside with its reason, never dropped silently.

What counts as an empty or malformed file and as a bad record is the parser's
(:mod:`lakeflow.compaction.parse`, under the record contract of :mod:`lakeflow.schema.records`). Empty and malformed files are *quarantined* as a whole: recorded
in the ledger with the reason (so later runs skip it), listed in the report and the lineage event,
and copied beside a ``.reason.json`` to the Iceberg table's ``_lakeflow/quarantine/files/run=<run id>/``
(the raw file stays where it is: the raw table is the ingestion's, its retention too). Bad records
inside an otherwise good file are written to ``_lakeflow/quarantine/records/run=<run id>/`` there.
Nothing is written to the raw table, which the compaction may only read (:mod:`lakeflow.compaction.naming`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from lakeflow.compaction.files import FileEntry, Storage
from lakeflow.compaction.naming import quarantined_files_dir

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Sorted:
    """This run's new files, sorted: compacted (with rows and bad records) or quarantined (with why)."""

    compacted: tuple[FileEntry, ...]
    quarantined: tuple[FileEntry, ...]
    reasons: Mapping[str, str]  # rel → reason, for the quarantined
    rows: Mapping[str, int]  # rel → readings read (good and bad), for the compacted
    bad_rows: Mapping[str, int]  # rel → records failing the schema, for the compacted


def sort_files(
    files: Sequence[FileEntry], reasons: Mapping[str, str], rows: Mapping[str, int], bad_rows: Mapping[str, int]
) -> Sorted:
    """Split ``files``: those with a ``reasons`` entry are quarantined, the rest compacted."""
    compacted: list[FileEntry] = []
    quarantined: list[FileEntry] = []
    for f in files:  # (one pass: a batch holds 100,000s)
        (quarantined if f.rel in reasons else compacted).append(f)
    return Sorted(
        compacted=tuple(compacted),
        quarantined=tuple(quarantined),
        reasons={f.rel: reasons[f.rel] for f in quarantined},
        rows={f.rel: rows.get(f.rel, 0) for f in compacted},
        bad_rows={f.rel: bad_rows.get(f.rel, 0) for f in compacted},
    )


def copy_quarantined(
    raw: Storage, target: Storage, files: Sequence[FileEntry], reasons: Mapping[str, str], run_id: str
) -> int:
    """Copy quarantined raw files to the run's quarantine folder of the Iceberg table (their raw path
    kept), each with a ``.reason.json`` beside it; the raw files stay. How many."""
    folder = quarantined_files_dir(run_id)
    for f in files:
        dst = f"{folder}/{f.rel}"
        target.write(dst, raw.read(f.rel))
        target.write(
            dst + ".reason.json",
            json.dumps(
                {"file": raw.uri(f.rel), "size": f.size, "reason": reasons.get(f.rel, ""), "run_id": run_id}
            ).encode(),
        )
        log.info("[quarantine] copied %s → %s", raw.uri(f.rel), target.uri(dst))
    return len(files)
