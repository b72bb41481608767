"""Crash recovery: every run writes down what it is about to create (an *intent*) before creating it.

Intents live under the target table's ``_lakeflow/compaction/``, which only the compactor writes.
The next run (holding the lease) reads the intents left behind:

- a run the table shows as committed only lost its tidy-up, which is finished;
- a run that could still commit — the table is still at the snapshot it planned on, so its
  commit's assertion would pass — is left alone until the table has moved on;
- any other run never became visible and never can: the files it wrote (staged and final
  Parquet, its ledger index and segments, its quarantined records and copies of quarantined files)
  are orphans and are deleted — all under the Iceberg table: recovery never touches the raw table.

Nothing is deleted on an intent's word alone. Each path must be exactly one its run would have
made (derived from its run id: see :mod:`lakeflow.compaction.naming`), a data file that any
snapshot of the table references is never deleted (the manifests are checked first), and neither
is the ledger the table points at, nor a segment it names. An intent that fails these checks is reported and set aside
under ``_lakeflow/compaction/rejected/``, never acted on.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, field

from lakeflow.compaction.commit import Target, reachable
from lakeflow.compaction.files import Storage
from lakeflow.compaction.ledger import Ledger, drop_superseded
from lakeflow.compaction.naming import (
    LEDGER_PATTERN,
    STATE_DIR,
    intent_name,
    is_data_file_of,
    is_run_id,
    ledger_name,
    quarantined_files_dir,
    records_dir,
    segment_dir,
    staging_dir,
)
from lakeflow.errors import LakeflowError

log = logging.getLogger(__name__)
REJECTED_DIR = f"{STATE_DIR}/rejected"


class InvalidIntent(LakeflowError, ValueError):
    """An intent that is not exactly what a run of ours writes."""


@dataclass(frozen=True)
class Intent:
    """What a run creates. Every path but the data files follows from the run id."""

    run_id: str
    planned_snapshot: int | None  # the table's snapshot the run planned on (its commit asserts it)
    data_files: tuple[str, ...] = ()  # target-relative final data files
    previous_ledger: str = ""  # target-relative ledger it replaces (deleted once committed)

    @property
    def staging(self) -> str:
        return staging_dir(self.run_id)

    @property
    def records(self) -> str:
        """Target-relative folder of the run's quarantined records."""
        return records_dir(self.run_id)

    @property
    def quarantined_files(self) -> str:
        """Target-relative folder of the run's copies of quarantined raw files."""
        return quarantined_files_dir(self.run_id)

    @property
    def ledger(self) -> str:
        return ledger_name(self.run_id)

    def to_bytes(self) -> bytes:
        return json.dumps(asdict(self), indent=1).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> Intent:
        """Parse and validate an intent; :class:`InvalidIntent` says what is wrong with it."""
        try:
            body = json.loads(data)
        except (ValueError, RecursionError) as exc:
            raise InvalidIntent(f"not JSON ({exc})") from None
        if not isinstance(body, dict) or set(body) != {f for f in cls.__dataclass_fields__}:
            raise InvalidIntent(f"expected the fields {sorted(cls.__dataclass_fields__)}")
        run_id, snapshot, files, previous = (
            body["run_id"],
            body["planned_snapshot"],
            body["data_files"],
            body["previous_ledger"],
        )
        if not isinstance(run_id, str) or not is_run_id(run_id):
            raise InvalidIntent(f"run id {run_id!r} is not a run id")
        if snapshot is not None and (not isinstance(snapshot, int) or isinstance(snapshot, bool)):
            raise InvalidIntent(f"planned snapshot {snapshot!r} is not a snapshot id")
        if not isinstance(files, list) or not all(isinstance(f, str) and is_data_file_of(f, run_id) for f in files):
            raise InvalidIntent(f"data files {files!r} are not all named by run {run_id}")
        if not isinstance(previous, str) or (previous and not LEDGER_PATTERN.fullmatch(previous)):
            raise InvalidIntent(f"previous ledger {previous!r} is not a ledger path")
        return cls(run_id=run_id, planned_snapshot=snapshot, data_files=tuple(files), previous_ledger=previous)


def save_intent(target: Storage, intent: Intent) -> None:
    target.write(intent_name(intent.run_id), intent.to_bytes())


@dataclass
class Recovered:
    """What recovery did: orphan data files deleted, runs left for later, intents set aside."""

    orphans_removed: int = 0
    runs_deferred: int = 0
    intents_rejected: list[str] = field(default_factory=list)  # "<file>: <reason>"


def recover(target: Target, ledger: Ledger) -> Recovered:
    """Tidy up after every earlier run that left an intent (see the module's docstring)."""
    done, storage = Recovered(), target.storage
    referenced: set[str] | None = None
    for entry in storage.list(STATE_DIR):
        if not (
            entry.rel.startswith(f"{STATE_DIR}/intent-")
            and entry.rel.endswith(".json")
            and entry.rel.count("/") == STATE_DIR.count("/") + 1
        ):
            continue
        try:
            intent = Intent.from_bytes(storage.read(entry.rel))
            if entry.rel != intent_name(intent.run_id):
                raise InvalidIntent(f"its file name does not carry its run id {intent.run_id}")
        except InvalidIntent as exc:
            _set_aside(storage, entry.rel, str(exc))
            done.intents_rejected.append(f"{entry.rel}: {exc}")
            continue
        if ledger.committed(intent.run_id) or target.committed(intent.run_id):
            log.info("[recover] run %s committed; finishing its tidy-up", intent.run_id)
            finish(target, intent)
            continue
        if target.snapshot_id == intent.planned_snapshot:
            log.info(
                "[recover] run %s could still commit (the table is at the snapshot it planned on): "
                "leaving its files until the table moves on",
                intent.run_id,
            )
            done.runs_deferred += 1
            continue
        if referenced is None:
            referenced = reachable(target.table.io, target.table.metadata.snapshots)
        kept = [rel for rel in intent.data_files if storage.uri(rel) in referenced]
        for rel in kept:
            log.error("[recover] run %s: %s is referenced by the table: kept", intent.run_id, rel)
        gone = [rel for rel in intent.data_files if rel not in kept and storage.exists(rel)]
        log.warning(
            "[recover] run %s never committed: removing its %d data file(s), staging and bookkeeping",
            intent.run_id,
            len(gone),
        )
        for rel in gone:
            storage.delete(rel)
        done.orphans_removed += len(gone)
        storage.delete_dir(intent.staging)
        storage.delete_dir(intent.records)
        storage.delete_dir(intent.quarantined_files)
        if intent.ledger != target.ledger_rel:
            storage.delete(intent.ledger)
        if not any(seg.startswith(segment_dir(intent.run_id) + "/") for seg in ledger.segments):
            storage.delete_dir(segment_dir(intent.run_id))
        storage.delete(entry.rel)
    return done


def finish(target: Target, intent: Intent) -> None:
    """After the commit: drop the replaced ledger and the segments only it named (never the current
    ones), the staging folder, the intent."""
    if intent.previous_ledger and intent.previous_ledger != target.ledger_rel:
        drop_superseded(target.storage, intent.previous_ledger, target.ledger_rel)
        target.storage.delete(intent.previous_ledger)
    target.storage.delete_dir(intent.staging)
    target.storage.delete(intent_name(intent.run_id))


def _set_aside(storage: Storage, rel: str, reason: str) -> None:
    """Move an invalid intent to ``rejected/`` with its reason beside it; never fails the run."""
    name = rel.rsplit("/", 1)[-1]
    log.error(
        "[recover] %s is not a valid intent (%s): set aside under %s, not acted on",
        storage.uri(rel),
        reason,
        storage.uri(REJECTED_DIR),
    )
    try:
        storage.write(f"{REJECTED_DIR}/{name}.reason.json", json.dumps({"file": rel, "reason": reason}).encode())
        storage.move(rel, f"{REJECTED_DIR}/{name}")
    except OSError as exc:
        log.error("[recover] could not set %s aside (%s): it will be reported again", rel, exc)
