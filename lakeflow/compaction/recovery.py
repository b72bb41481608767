"""Crash recovery: every run writes down what it is about to create (an *intent*) before creating it.

The next run (holding the lock) reads the intents left behind: a run the ledger lists as
committed only lost its tidy-up; any other run never became visible, so the files it wrote
(staged and final Parquet, its ledger, its quarantined records) are orphans and are deleted.
Only files a lakeflow run named are ever deleted — never anything else in the table.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, replace

from lakeflow.compaction.ledger import Ledger
from lakeflow.compaction.storage import Storage

log = logging.getLogger(__name__)
INTENT_PREFIX = "intent-"


@dataclass(frozen=True)
class Intent:
    """What a run creates: folders and files in the target (data) and the raw table (bookkeeping)."""

    run_id: str
    staging: str                        # target-relative folder Spark writes into
    records: str                        # raw-relative folder of quarantined records
    data_files: tuple[str, ...] = ()    # target-relative final data files
    ledger: str = ""                    # raw-relative ledger this run commits
    previous_ledger: str = ""           # raw-relative ledger it replaces (deleted once committed)

    def with_outputs(self, data_files: list[str], ledger: str, previous_ledger: str) -> "Intent":
        return replace(self, data_files=tuple(data_files), ledger=ledger, previous_ledger=previous_ledger)

    def to_bytes(self) -> bytes:
        return json.dumps(asdict(self), indent=1).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> "Intent":
        body = json.loads(data)
        body["data_files"] = tuple(body.get("data_files", ()))
        return cls(**body)


def intent_path(state_dir: str, run_id: str) -> str:
    return f"{state_dir}/{INTENT_PREFIX}{run_id}.json"


def save_intent(raw: Storage, state_dir: str, intent: Intent) -> None:
    raw.write(intent_path(state_dir, intent.run_id), intent.to_bytes())


def recover(raw: Storage, target: Storage, state_dir: str, ledger: Ledger) -> int:
    """Tidy up after every earlier run that left an intent; returns how many orphan data files went."""
    removed = 0
    for entry in raw.list(state_dir):
        name = entry.rel.rsplit("/", 1)[-1]
        if not (name.startswith(INTENT_PREFIX) and name.endswith(".json")):
            continue
        intent = Intent.from_bytes(raw.read(entry.rel))
        if ledger.committed(intent.run_id):
            log.info("[recover] run %s committed; finishing its tidy-up", intent.run_id)
            finish(raw, target, state_dir, intent)
            continue
        log.warning("[recover] run %s never committed: removing its %d data file(s), staging and "
                    "bookkeeping", intent.run_id, len(intent.data_files))
        for rel in intent.data_files:
            if target.exists(rel):
                target.delete(rel)
                removed += 1
        target.delete_dir(intent.staging)
        if intent.records:
            raw.delete_dir(intent.records)
        if intent.ledger:
            raw.delete(intent.ledger)
        raw.delete(entry.rel)
    return removed


def finish(raw: Storage, target: Storage, state_dir: str, intent: Intent) -> None:
    """After the commit: drop the replaced ledger, the staging folder, then the intent itself."""
    if intent.previous_ledger:
        raw.delete(intent.previous_ledger)
    target.delete_dir(intent.staging)
    raw.delete(intent_path(state_dir, intent.run_id))
