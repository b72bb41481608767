"""Bad input is set aside with its reason, never dropped silently.

What counts as an empty or malformed file and as a bad record is the engine contract's
(:mod:`lakeflow.compaction.engine`). Empty and malformed files are *quarantined* as a whole: recorded
in the ledger with the reason (so later runs skip it), listed in the report and the lineage event,
and optionally moved to ``<raw>/_quarantine/`` beside a ``.reason.json``. Bad records inside an
otherwise good file are written to ``<raw>/_quarantine/records/run=<run id>/``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from lakeflow.compaction.engine import EMPTY, MALFORMED
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


def unread_reasons(raw: Storage, files: Sequence[FileEntry]) -> dict[str, str]:
    """Why files that produced no rows did so: empty, or not JSON. A valid ``[]`` has no reason.

    The driver reads these (small) files itself, so a file the engine skipped for any other cause
    stops the run instead of being marked consumed.
    """
    reasons: dict[str, str] = {}
    for f in files:
        text = raw.read(f.rel) if f.size else b""
        if not text.strip():
            reasons[f.rel] = EMPTY
            continue
        try:
            value = json.loads(text)
        except ValueError:
            reasons[f.rel] = MALFORMED
            continue
        if value != []:
            raise RuntimeError(
                f"the engine read no rows from {raw.uri(f.rel)} ({f.size} bytes) although it holds "
                "JSON: refusing to mark it consumed"
            )
    return reasons


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
