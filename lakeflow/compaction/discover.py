"""Which files under the raw table are committed part files (never in-progress, pending or hidden)."""

from __future__ import annotations

from dataclasses import dataclass

from lakeflow.compaction.storage import FileEntry, Storage

PART_SUFFIX = ".json"


def is_committed_part(rel: str) -> bool:
    """True for a committed part file: a ``.json`` file with no hidden component in its path.

    Flink's FileSink keeps in-progress and pending files hidden (``.part-….json.inprogress.<id>``)
    until the checkpoint commits them; names starting with ``_`` (``_quarantine/``, ``_lakeflow/``,
    ``_SUCCESS``) are bookkeeping, as in Hadoop's convention.
    """
    parts = rel.split("/")
    return (rel.endswith(PART_SUFFIX) and ".inprogress" not in parts[-1]
            and not any(p.startswith((".", "_")) or p == "" for p in parts))


@dataclass(frozen=True)
class Listing:
    """The raw table's files: the committed part files, and how many other files were ignored."""

    parts: tuple[FileEntry, ...]
    ignored: int

    @property
    def paths(self) -> frozenset[str]:
        return frozenset(f.rel for f in self.parts)


def list_parts(storage: Storage) -> Listing:
    """List the committed part files under the raw table's location (sub-folders included)."""
    entries = storage.list()
    parts = tuple(e for e in entries if is_committed_part(e.rel))
    return Listing(parts=parts, ignored=len(entries) - len(parts))
