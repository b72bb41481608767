"""Bad input is set aside with its reason, never dropped silently.

What counts as an empty or malformed file and as a bad record is the parser's
(:mod:`lakeflow.compaction.parse`, under the record contract of :mod:`lakeflow.schema.records`). Empty and malformed files are *quarantined* as a whole: recorded
in the ledger with the reason (so later runs skip it), listed in the report and the lineage event,
and optionally moved to ``<raw>/_quarantine/`` beside a ``.reason.json``. Bad records inside an
otherwise good file are written to ``<raw>/_quarantine/records/run=<run id>/``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from lakeflow.compaction.files import FileEntry, Storage

log = logging.getLogger(__name__)
QUARANTINE_DIR = "_quarantine"


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
    return Sorted(
        compacted=tuple(f for f in files if f.rel not in reasons),
        quarantined=tuple(f for f in files if f.rel in reasons),
        reasons={f.rel: reasons[f.rel] for f in files if f.rel in reasons},
        rows={f.rel: rows.get(f.rel, 0) for f in files if f.rel not in reasons},
        bad_rows={f.rel: bad_rows.get(f.rel, 0) for f in files if f.rel not in reasons},
    )


def records_dir(run_id: str) -> str:
    """Where a run's records failing the schema go (relative to the raw location)."""
    return f"{QUARANTINE_DIR}/records/run={run_id}"


def move_quarantined(raw: Storage, files: Sequence[FileEntry], reasons: Mapping[str, str], run_id: str) -> int:
    """Move quarantined files to ``_quarantine/<same path>`` with a ``.reason.json`` beside each."""
    for f in files:
        dst = f"{QUARANTINE_DIR}/{f.rel}"
        raw.write(
            dst + ".reason.json",
            json.dumps({"file": f.rel, "size": f.size, "reason": reasons.get(f.rel, ""), "run_id": run_id}).encode(),
        )
        raw.move(f.rel, dst)
        log.info("[quarantine] moved %s → %s", f.rel, dst)
    return len(files)
