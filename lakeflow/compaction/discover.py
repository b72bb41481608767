"""Which files under the raw table are committed part files (:func:`lakeflow.readings.is_committed_part`).

The sink writes into one folder per UTC hour (a *bucket*, :data:`lakeflow.readings.BUCKET_FORMAT`);
files directly under the location (tables written before) form the root bucket ``""``. A run lists
only the buckets from its window's first one on (:func:`window_start`): one delimiter listing of the
location starting after that name, then each of those buckets — O(new buckets), not O(history).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import timedelta

from lakeflow.compaction.files import FileEntry, Storage
from lakeflow.readings import bucket_name, bucket_time, is_committed_part

ROOT = ""  # the bucket of the files directly under the raw location


def bucket_of(rel: str) -> str:
    """The bucket (top-level folder) a raw-relative path is in; :data:`ROOT` for a file at the top."""
    return rel.split("/", 1)[0] if "/" in rel else ROOT


@dataclass(frozen=True)
class PartListing:
    """The raw table's files in the buckets listed: the committed part files, and how many other
    files were ignored. ``buckets`` None: every bucket (a full listing)."""

    parts: tuple[FileEntry, ...]
    ignored: int
    buckets: frozenset[str] | None = None
    requests: int = field(default=0, compare=False)  # listings issued

    @property
    def paths(self) -> frozenset[str]:
        return frozenset(f.rel for f in self.parts)

    def covers(self, bucket: str) -> bool:
        """True if every file of ``bucket`` was listed (so one missing from it is gone)."""
        return self.buckets is None or bucket in self.buckets

    def merge(self, other: PartListing) -> PartListing:
        """Both listings (of different buckets) as one."""
        buckets = None if self.buckets is None or other.buckets is None else self.buckets | other.buckets
        parts = {f.rel: f for f in (*self.parts, *other.parts)}
        return PartListing(
            parts=tuple(sorted(parts.values(), key=lambda f: f.rel)),
            ignored=self.ignored + other.ignored,
            buckets=buckets,
            requests=self.requests + other.requests,
        )


def list_parts(storage: Storage, since: str | None = None) -> PartListing:
    """List the committed part files: every file under the raw location (``since`` None), or the
    files at its top and in the buckets (folders) whose names sort from ``since`` on."""
    if since is None:
        entries = storage.list()
        parts = tuple(e for e in entries if is_committed_part(e.rel))
        return PartListing(parts=parts, ignored=len(entries) - len(parts), requests=1)
    top, folders = storage.list_top(since)
    listing = _parts(top, frozenset({ROOT}), 1)
    return listing.merge(list_buckets(storage, (f for f in folders if not f.startswith((".", "_")))))


def list_buckets(storage: Storage, buckets: Iterable[str]) -> PartListing:
    """List the committed part files of ``buckets`` (folder names, not the root)."""
    entries: list[FileEntry] = []
    names = sorted(set(buckets))
    for name in names:
        entries += storage.list(name)
    return _parts(entries, frozenset(names), len(names))


def window_start(buckets: Iterable[str], look_back: timedelta) -> str | None:
    """The first bucket a run lists: ``look_back`` before the newest time bucket of ``buckets`` (those
    the ledger holds); None when it holds none (list everything)."""
    times = [t for t in map(bucket_time, buckets) if t is not None]
    return bucket_name(max(times) - look_back) if times else None


def _parts(entries: list[FileEntry], buckets: frozenset[str], requests: int) -> PartListing:
    parts = tuple(sorted((e for e in entries if is_committed_part(e.rel)), key=lambda e: e.rel))
    return PartListing(parts=parts, ignored=len(entries) - len(parts), buckets=buckets, requests=requests)
