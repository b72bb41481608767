"""Progress of a run, read from what it committed: the part files in the table location's hour buckets.

A part file is committed when the checkpoint that rolled it completes (it is then renamed from a
hidden ``<bucket>/.part-….inprogress.…`` to ``<bucket>/part-….json``). The JSON-array writer puts one reading per
line, so a committed file holds as many readings as newlines. :class:`ProgressWatcher` logs a
line per commit while the job runs; :func:`committed_since` tells what the run left behind.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from urllib.parse import urlparse

from lakeflow.credentials import S3ASettings
from lakeflow.readings import bucket_name, bucket_time, is_committed_part
from lakeflow.uris import is_s3

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PartFile:
    name: str  # its path under the location: ``<bucket>/part-….json``
    size: int
    records: int


@dataclass(frozen=True)
class LocationScan:
    """The part files listed: ``committed`` by path, ``uncommitted`` the paths of hidden in-progress ones."""

    committed: Mapping[str, PartFile]
    uncommitted: tuple[str, ...]


def records_in(data: bytes) -> int:
    """Readings in one part file written by ``JsonArrayWriterFactory`` (one per line)."""
    return data.count(b"\n")


class PartFiles:
    """Lists the part files a run writes at a table location (a local directory, or S3 through
    boto3): every file in the hour buckets from ``since`` (default: when created) less
    ``CLOCK_SKEW`` on. The sink writes into the bucket of the hour it writes in, so a run started
    then puts nothing in an earlier one, and a listing costs one request for the location's folders
    (from that bucket on) and one per bucket since — O(the run's hours), not O(the table's history).

    On S3 it reads with ``s3a``'s credentials; ``refresh`` (e.g. a re-vend from the catalog) is
    called for new ones before those expire — ``REFRESH_BEFORE`` ahead, or halfway through their
    remaining lifetime when that is shorter — so a watcher of a run longer than the vended
    credentials' lifetime keeps listing. A failed refresh is retried ``RETRY`` later."""

    REFRESH_BEFORE = timedelta(minutes=5)
    RETRY = timedelta(seconds=30)
    CLOCK_SKEW = timedelta(minutes=15)  # how far the TaskManagers' clocks may lag this one's

    def __init__(
        self,
        location: str,
        s3a: S3ASettings | None = None,
        refresh: Callable[[], S3ASettings] | None = None,
        since: datetime | None = None,
    ) -> None:
        self.location = location.rstrip("/")
        self.first_bucket = bucket_name((since or datetime.now(timezone.utc)) - self.CLOCK_SKEW)
        parsed = urlparse(self.location)
        self._s3 = is_s3(self.location)
        self._refresh = refresh
        if self._s3:
            self._bucket, self._prefix = parsed.netloc, parsed.path.strip("/") + "/"
            self._connect(s3a)
        else:
            self._dir = Path(parsed.path)

    def _connect(self, s3a: S3ASettings | None) -> None:
        import boto3

        self._client = boto3.client("s3", **(s3a.boto3() if s3a else {}))
        expires_at = s3a.expires_at if s3a else None
        now = datetime.now(timezone.utc)
        self._refresh_at = (
            expires_at - min(self.REFRESH_BEFORE, max(expires_at - now, timedelta(0)) / 2)
            if expires_at and self._refresh
            else None
        )

    def _s3_client(self):
        now = datetime.now(timezone.utc)
        if self._refresh and self._refresh_at and now >= self._refresh_at:
            self._refresh_at = now + self.RETRY  # kept should the refresh fail
            self._connect(self._refresh())
        return self._client

    def scan(self, known: Mapping[str, PartFile] = {}) -> LocationScan:
        """Every part file now; readings are counted only in files not in ``known``."""
        committed: dict[str, PartFile] = {}
        uncommitted: list[str] = []
        for name, size in self._entries():
            file_name = name.rsplit("/", 1)[-1]
            if file_name.startswith("."):
                if ".inprogress" in file_name:
                    uncommitted.append(name)
            elif is_committed_part(name):
                seen = known.get(name)
                committed[name] = (
                    seen if seen and seen.size == size else PartFile(name, size, records_in(self._read(name)))
                )
        return LocationScan(committed, tuple(sorted(uncommitted)))

    def _buckets(self) -> list[str]:
        """The location's hour buckets from :attr:`first_bucket` on."""
        if self._s3:
            pages = (
                self._s3_client()
                .get_paginator("list_objects_v2")
                .paginate(
                    Bucket=self._bucket, Prefix=self._prefix, Delimiter="/", StartAfter=self._prefix + self.first_bucket
                )
            )
            names = [
                p["Prefix"][len(self._prefix) :].rstrip("/") for page in pages for p in page.get("CommonPrefixes", [])
            ]
        else:
            names = [p.name for p in self._dir.iterdir() if p.is_dir()] if self._dir.is_dir() else []
        return sorted(n for n in names if n >= self.first_bucket and bucket_time(n) is not None)

    def _entries(self) -> Iterator[tuple[str, int]]:
        """(path under the location, size) of every file in the buckets listed."""
        for bucket in self._buckets():
            if self._s3:
                pages = (
                    self._s3_client()
                    .get_paginator("list_objects_v2")
                    .paginate(Bucket=self._bucket, Prefix=f"{self._prefix}{bucket}/")
                )
                for page in pages:
                    for obj in page.get("Contents", []):
                        yield obj["Key"][len(self._prefix) :], int(obj["Size"])
            else:
                for entry in (self._dir / bucket).rglob("*"):
                    if entry.is_file():
                        yield entry.relative_to(self._dir).as_posix(), entry.stat().st_size

    def _read(self, name: str) -> bytes:
        if self._s3:
            return self._s3_client().get_object(Bucket=self._bucket, Key=self._prefix + name)["Body"].read()
        return (self._dir / name).read_bytes()


@dataclass(frozen=True)
class Summary:
    """What one run committed (files that were not there when it started)."""

    location: str
    files: int
    records: int
    bytes: int
    uncommitted: tuple[str, ...]

    def __str__(self) -> str:
        text = f"{self.files} files, {self.records} readings, {_size(self.bytes)} → {self.location}"
        if self.uncommitted:
            text += (
                f" ({len(self.uncommitted)} hidden in-progress files there too: from an attempt that "
                "failed, a cancelled run or another writer; readers skip them)"
            )
        return text


@dataclass(frozen=True)
class Outcome:
    """How a run ended: what it committed per table, and the savepoint it stopped with to restart with
    more tables (None: it ended by itself)."""

    summaries: tuple[Summary, ...]
    savepoint: str | None = None


def committed_since(scan: LocationScan, before: Mapping[str, PartFile], location: str) -> Summary:
    """What ``scan`` holds that was not committed ``before``."""
    new = [f for name, f in scan.committed.items() if name not in before]
    return Summary(location, len(new), sum(f.records for f in new), sum(f.size for f in new), scan.uncommitted)


class ProgressWatcher:
    """Logs a line whenever new part files are committed at one of the ``locations`` (about one per
    table and checkpoint), from a daemon thread polling them every ``poll_s`` seconds."""

    def __init__(self, locations: Sequence[PartFiles], poll_s: float) -> None:
        self.locations = tuple(locations)
        self.poll_s = poll_s
        self.before = [files.scan().committed for files in self.locations]
        self.first_commit_at: float | None = None
        self._known = [dict(before) for before in self.before]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lakeflow-progress", daemon=True)

    def start(self) -> ProgressWatcher:
        self._thread.start()
        return self

    def stop(self) -> tuple[Summary, ...]:
        """Stop polling; per location, the summary of everything committed since the watcher was created."""
        self._stop.set()
        self._thread.join()
        return self.poll()

    def poll(self) -> tuple[Summary, ...]:
        return tuple(self._poll(i) for i in range(len(self.locations)))

    def _poll(self, i: int) -> Summary:
        files, known = self.locations[i], self._known[i]
        scan = files.scan(known)
        new = [f for name, f in scan.committed.items() if name not in known]
        if new:
            self.first_commit_at = self.first_commit_at or time.monotonic()
            known.update((f.name, f) for f in new)
            total = committed_since(scan, self.before[i], files.location)
            log.info(
                "committed %d file(s), %d readings, %s → %s (run total: %d files, %d readings)",
                len(new),
                sum(f.records for f in new),
                _size(sum(f.size for f in new)),
                files.location,
                total.files,
                total.records,
            )
        return committed_since(scan, self.before[i], files.location)

    def _run(self) -> None:
        while not self._stop.wait(self.poll_s):
            for i, files in enumerate(self.locations):
                try:
                    self._poll(i)
                except Exception as exc:  # a flaky listing must not end the run
                    log.warning("progress: cannot list %s: %s", files.location, exc)


def _size(n: float) -> str:
    units = ("B", "KiB", "MiB", "GiB")
    i = 0
    while n >= 1024 and i < len(units) - 1:
        n, i = n / 1024, i + 1
    return f"{n:.0f} B" if i == 0 else f"{n:.1f} {units[i]}"
