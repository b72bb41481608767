"""The exactly-once ledger: which raw files the Iceberg table has consumed (compacted or quarantined).

Each run writes a new ledger file (gzipped JSON, under the Iceberg table's ``_lakeflow/`` folder) and
points the Iceberg table's ``lakeflow.compaction.ledger`` property at it *in the same commit* that
adds the data files: the rows and the record of their source files become visible together, or
not at all. Entries of raw files that no longer exist (deleted, moved to ``_quarantine/``) are
dropped, so the ledger stays as large as the raw folder.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import asdict, dataclass, field
from typing import Iterable, Mapping, Optional

from lakeflow.compaction.discover import Listing
from lakeflow.compaction.storage import FileEntry, Storage

COMPACTED = "compacted"
QUARANTINED = "quarantined"
MAX_RUNS = 100
VERSION = 1


class LedgerError(RuntimeError):
    """The ledger the table points at cannot be read: compacting now could duplicate rows."""


@dataclass(frozen=True)
class Entry:
    """One consumed raw file."""

    status: str          # COMPACTED or QUARANTINED
    size: int
    run_id: str
    rows: int = 0        # readings taken from it (compacted) — before de-duplication
    reason: str = ""     # why it was quarantined


@dataclass(frozen=True)
class RunRecord:
    """One committed run."""

    run_id: str
    committed_at: str
    files: int
    rows_out: int
    records: str = ""    # folder of its quarantined records (relative to the raw location), if any


@dataclass(frozen=True)
class Ledger:
    files: Mapping[str, Entry] = field(default_factory=dict)  # raw-relative path → entry
    runs: tuple[RunRecord, ...] = ()                           # oldest first, at most MAX_RUNS
    uri: str = ""                                              # where it was read from ("" = none yet)

    def new_parts(self, listing: Listing) -> list[FileEntry]:
        """The listed part files not consumed yet."""
        return [f for f in listing.parts if f.rel not in self.files]

    def consumed(self, listing: Listing, status: str) -> list[FileEntry]:
        """The listed part files consumed with ``status``."""
        return [f for f in listing.parts if self.files.get(f.rel, Entry("", 0, "")).status == status]

    def committed(self, run_id: str) -> bool:
        return any(r.run_id == run_id for r in self.runs)

    def advance(self, listing: Listing, entries: Mapping[str, Entry], run: RunRecord) -> "Ledger":
        """The next ledger: this run's ``entries`` added, entries of vanished files dropped."""
        present = listing.paths
        files = {rel: e for rel, e in self.files.items() if rel in present}
        files.update(entries)
        return Ledger(files=dict(sorted(files.items())), runs=(*self.runs, run)[-MAX_RUNS:])

    def to_bytes(self) -> bytes:
        body = {"version": VERSION, "runs": [asdict(r) for r in self.runs],
                "files": {rel: vars(e) for rel, e in self.files.items()}}  # flat: vars() is 20× asdict()
        return gzip.compress(json.dumps(body, separators=(",", ":")).encode(), mtime=0)

    @classmethod
    def from_bytes(cls, data: bytes, uri: str = "") -> "Ledger":
        body = json.loads(gzip.decompress(data))
        if body.get("version") != VERSION:
            raise LedgerError(f"ledger {uri}: version {body.get('version')!r}, expected {VERSION}")
        return cls(files={rel: Entry(**e) for rel, e in body["files"].items()},
                   runs=tuple(RunRecord(**r) for r in body["runs"]), uri=uri)


def load_ledger(pointer: Optional[str], target: Storage, raw: Storage) -> Ledger:
    """The ledger ``pointer`` (the table property) names — under the Iceberg table, or under the raw
    table where lakeflow before 0.2 kept it; empty if none."""
    if not pointer:
        return Ledger()
    for storage in (target, raw):
        try:
            rel = storage.relative(pointer)
        except ValueError:
            continue
        return _read(storage, rel, pointer)
    raise LedgerError(f"the table's ledger {pointer} is neither under the table nor under the raw table "
                      f"{raw.location}: was the table compacted from another source?")


def _read(storage: Storage, rel: str, pointer: str) -> Ledger:
    if not storage.exists(rel):
        raise LedgerError(f"the table's ledger {pointer} is missing: refusing to compact (raw files "
                          "already compacted would be compacted again)")
    try:
        return Ledger.from_bytes(storage.read(rel), uri=pointer)
    except (OSError, ValueError, KeyError, TypeError, EOFError) as exc:
        raise LedgerError(f"the table's ledger {pointer} is unreadable: {exc}") from None


def entries_for(files: Iterable[FileEntry], status: str, run_id: str,
                rows: Optional[Mapping[str, int]] = None,
                reasons: Optional[Mapping[str, str]] = None) -> dict[str, Entry]:
    """Ledger entries for files consumed by this run."""
    return {f.rel: Entry(status=status, size=f.size, run_id=run_id, rows=(rows or {}).get(f.rel, 0),
                         reason=(reasons or {}).get(f.rel, "")) for f in files}
