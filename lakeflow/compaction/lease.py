"""One compaction per Iceberg table at a time, on any host: a lease kept in the table's own folder.

The lease is a series of small files ``_lakeflow/compaction/lease/<generation>.json`` under the
target table, each *created only if absent* (S3 ``If-None-Match: *``, a hard link on local disks):
of two runs that read the same latest generation, only one creates the next. The holder renews
the lease by creating the next generation every third of its time-to-live, from a background
thread, and ends it with a last generation marked released. A holder that vanished (a crash, a
killed pod) loses the lease when its expiry passes — at once if it ran on this host and its
process is gone.

Correctness never rests on the lease alone: every commit asserts the snapshot it was planned on,
and recovery deletes only the files of runs that can no longer commit (see ``recovery``).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta, timezone

from lakeflow.compaction.files import Storage
from lakeflow.compaction.naming import STATE_DIR
from lakeflow.errors import LakeflowError

log = logging.getLogger(__name__)
LEASE_DIR = f"{STATE_DIR}/lease"


class CompactionBusy(LakeflowError, RuntimeError):
    """Another compaction of the same target table holds the lease."""

    exit_code = 3  # EXIT_BUSY of lakeflow.compaction.run: a scheduler may simply try again later


class LeaseLost(LakeflowError, RuntimeError):
    """This run's lease was taken over (it could not renew it in time): it must not go on."""


@dataclass(frozen=True)
class Holder:
    """Who holds a generation of the lease, until when."""

    run_id: str
    host: str
    pid: int
    boot_id: str
    expires_at: str  # ISO 8601, UTC
    released: bool = False

    def free(self, now: datetime) -> bool:
        """True when this generation no longer excludes anyone: released, expired, or a dead local process."""
        if self.released or datetime.fromisoformat(self.expires_at) <= now:
            return True
        return (self.host, self.boot_id) == (socket.gethostname(), _boot_id()) and not _alive(self.pid)

    def describe(self) -> str:
        return f"run {self.run_id}, pid {self.pid} on {self.host}, lease until {self.expires_at}"


class Lease:
    """The lease on one target table, held by one run; use as a context manager."""

    def __init__(self, storage: Storage, run_id: str, what: str, ttl_s: float) -> None:
        self.storage, self.run_id, self.what, self.ttl_s = storage, run_id, what, ttl_s
        self.generation = 0
        self._lost: str | None = None
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    def __enter__(self) -> Lease:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def acquire(self) -> None:
        """Take the lease or raise :class:`CompactionBusy` naming who holds it."""
        latest = self._latest()
        if latest is not None:
            generation, holder = latest
            if holder is not None and not holder.free(_now()):
                raise CompactionBusy(
                    f"another compaction of {self.what} is running ({holder.describe()}); "
                    f"lease {self.storage.uri(LEASE_DIR)}"
                )
            self.generation = generation
        if not self._next(released=False):
            raise CompactionBusy(
                f"another compaction of {self.what} is running (it took the lease just now); "
                f"lease {self.storage.uri(LEASE_DIR)}"
            )
        self._prune()
        self._renewer = threading.Thread(target=self._renew, name="lakeflow-lease", daemon=True)
        self._renewer.start()

    def check(self) -> None:
        """Raise :class:`LeaseLost` if renewing failed: called before anything irreversible."""
        if self._lost:
            raise LeaseLost(f"the lease on {self.what} was lost ({self._lost}); nothing more is done")

    def release(self) -> None:
        """Stop renewing and mark the lease released (a lost lease is left to its new holder)."""
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join()
        if not self._lost and self.generation and self._next(released=True):
            self._prune()

    def _renew(self) -> None:
        while not self._stop.wait(self.ttl_s / 3):
            try:
                if not self._next(released=False):
                    self._lost = f"generation {self.generation + 1} was created by another run"
            except Exception as exc:  # noqa: BLE001 - storage errors: keep trying until the expiry passes
                log.warning("[lease] renewing failed: %s", exc)
                continue
            if self._lost:
                log.error("[lease] %s", self._lost)
                return

    def _next(self, released: bool) -> bool:
        """Create the next generation as ours; False if another run created it first."""
        expires = _now() + timedelta(seconds=self.ttl_s)
        holder = Holder(
            run_id=self.run_id,
            host=socket.gethostname(),
            pid=os.getpid(),
            boot_id=_boot_id(),
            expires_at=expires.isoformat(timespec="milliseconds"),
            released=released,
        )
        if not self.storage.create(_name(self.generation + 1), json.dumps(asdict(holder)).encode()):
            return False
        self.generation += 1
        return True

    def _latest(self) -> tuple[int, Holder | None] | None:
        """The newest generation and its holder (None if unreadable: treated as free, it can only be ours)."""
        newest = max(self._generations(), default=None)
        if newest is None:
            return None
        try:
            return newest, Holder(**json.loads(self.storage.read(_name(newest))))
        except (OSError, ValueError, TypeError) as exc:
            log.warning("[lease] generation %d unreadable (%s): taking over", newest, exc)
            return newest, None

    def _prune(self) -> None:
        """Delete generations before ours (best effort: they exclude no one)."""
        for generation in self._generations():
            if generation < self.generation:
                self.storage.delete(_name(generation))

    def _generations(self) -> list[int]:
        names = (e.rel.rsplit("/", 1)[-1] for e in self.storage.list(LEASE_DIR))
        return [int(n[:-5]) for n in names if n.endswith(".json") and n[:-5].isdigit()]


def _name(generation: int) -> str:
    return f"{LEASE_DIR}/{generation:012d}.json"


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return ""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
