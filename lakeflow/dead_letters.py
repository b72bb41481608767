"""Dead letters: the Kafka messages the ingestion job took for no record, kept per raw table as part
files ``<location>/_dead_letters/<bucket>/part-….json`` (the readings' layout: one JSON array, one
letter per line; hidden ``.part-….inprogress…`` files are not committed yet and never read). A letter
is ``{"reason", "topic", "partition", "offset", "payload"}`` (``payload_base64`` when the message is
not UTF-8, ``payload`` null for a tombstone): docs/ingestion.md.

:func:`tally` counts them by reason; :func:`replay` checks each letter's message again, against the
stream's *current* record contract, exactly as the job's validator does
(:func:`lakeflow.schema.records.message_record`: a JSON object, no duplicate key, at most
KAFKA_MAX_MESSAGE_BYTES, fitting the contract). A message that passes lands in the raw table once, as
the job would have written it; the others stay dead letters, with the reason they fail for now.

Exactly once, whatever step a crash interrupts. Per dead-letter file ``D`` (its *token*: a digest of
its path and bytes, which change whenever a replay rewrites it):

1. *stage*: ``_dead_letters/_replay/<token>.json`` is created (only if absent: two replays of one file
   never both go on), holding the records to replay, the letters that stay and the digest of ``D``;
2. ``D`` is rewritten with the letters that stay (deleted when none do): from here on ``D`` no longer
   holds the replayed letters, so nothing can replay them again;
3. *publish*: the records become the committed part file ``<bucket>/part-replay-<token>-0.json`` of the
   raw table, in the bucket of the hour it is written (the compaction's look-back window lists it;
   a committed part file's name, :func:`lakeflow.readings.is_committed_part`), created atomically
   (a synced temporary file linked into place; one conditional PUT on S3) unless it is already in
   a bucket since the staging;
4. the staged file is deleted.

A replay first finishes every staged one it finds (a run that stopped after 1, 2 or 3): step 2 again
only if ``D`` still has the digest staged (else it was done), then 3 and 4. The compaction's ledger
consumes files by path and the name never recurs, so the records are compacted once. One window is
left: a crash between 3 and 4, then the compaction compacting *and deleting* the part file
(``--delete-source`` or retention, at least COMPACT_DELETE_MIN_AGE after it was written) before the
next replay would publish the records a second time — which the compaction's key de-duplication
against the table still catches when the schema declares a key.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from lakeflow.catalog import TableNotFound
from lakeflow.compaction.files import FileEntry, Storage
from lakeflow.compaction.source import open_raw
from lakeflow.errors import LakeflowError
from lakeflow.ingest.kafka import DEAD_LETTERS
from lakeflow.readings import PART_PREFIX, PART_SUFFIX, bucket_name, bucket_time, is_committed_part
from lakeflow.schema.records import Invalid, RecordContract, compact_json, message_record
from lakeflow.settings import Settings
from lakeflow.streams import Stream

REPLAY_DIR = f"{DEAD_LETTERS}/_replay"  # staged replays ("_": neither the compaction nor a count reads it)
REPLAY_PREFIX = f"{PART_PREFIX}-replay-"  # the replayed records' part files: part-replay-<token>-0.json
TOKEN_CHARS = 16  # hex digits of a dead-letter file's digest naming its replay
SKEW = timedelta(hours=1)  # a staged replay's part file is looked for from this long before its staging on


class DeadLetterError(LakeflowError, ValueError):
    """A dead-letter or staged file is not what lakeflow writes; the message names it."""


class Letter(BaseModel):
    """One dead letter as the ingestion job writes it: the fields read here (others are kept as they are)."""

    model_config = ConfigDict(extra="ignore", frozen=True, strict=True)

    reason: str
    topic: str | None = None
    partition: int | None = None
    offset: int | None = None
    payload: str | None = None
    payload_base64: str | None = None

    def message(self) -> bytes | None:
        """The Kafka message's bytes (None: a tombstone)."""
        if self.payload_base64 is not None:
            try:
                return base64.b64decode(self.payload_base64, validate=True)
            except binascii.Error as exc:
                raise ValueError(f"payload_base64 is no base64: {exc}") from None
        return None if self.payload is None else self.payload.encode("utf-8", "surrogatepass")


class Staged(BaseModel):
    """A replay under way (``_dead_letters/_replay/<token>.json``): what its steps 2 and 3 write."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    source: str  # the dead-letter file, under the raw location
    sha256: str  # its digest before the replay
    letters: str | None  # its content after (None: deleted)
    part: str  # the part file's name (in the bucket of the hour it is published in)
    records: str  # the part file's content
    replayed: dict[str, int]  # the replayed letters by the reason they had


@dataclass(frozen=True)
class LetterFile:
    """One committed dead-letter file: its path under the raw location, its bucket and its letters
    (each as read, and as the :class:`Letter` it holds)."""

    rel: str
    bucket: str
    data: bytes
    letters: tuple[tuple[dict[str, Any], Letter], ...]

    @property
    def token(self) -> str:
        """Names this version of the file's replay: a digest of its path and bytes."""
        return hashlib.sha256(self.rel.encode() + b"\0" + self.data).hexdigest()[:TOKEN_CHARS]


def json_array(documents: Sequence[str]) -> bytes:
    """A part file's bytes as the job's writer lays them out: ``[d1,\\nd2,\\n…dN]\\n``."""
    return ("[" + ",\n".join(documents) + "]\n").encode()


def read_letters(rel: str, data: bytes) -> LetterFile:
    """The dead-letter file at ``rel`` holding ``data``; DeadLetterError naming it when it is no JSON
    array of letters."""
    try:
        body = json.loads(data)
    except ValueError as exc:
        raise DeadLetterError(f"{rel}: not a JSON array of dead letters: {exc}") from None
    if not isinstance(body, list):
        raise DeadLetterError(f"{rel}: not a JSON array of dead letters")
    letters = []
    for i, raw in enumerate(body):
        try:
            letters.append((raw, Letter.model_validate(raw)))
        except ValidationError as exc:
            error = exc.errors()[0]
            where = ".".join(str(p) for p in error["loc"])
            raise DeadLetterError(f"{rel}: letter {i}: {where + ': ' if where else ''}{error['msg']}") from None
    sub = rel.removeprefix(f"{DEAD_LETTERS}/")
    return LetterFile(rel, sub.split("/", 1)[0] if "/" in sub else "", data, tuple(letters))


def letter_files(storage: Storage) -> list[FileEntry]:
    """The committed dead-letter files under the raw table at ``storage`` (hidden in-progress ones,
    staged replays and other ``_`` folders left out), in path order."""
    prefix = f"{DEAD_LETTERS}/"
    return [e for e in storage.list(DEAD_LETTERS) if is_committed_part(e.rel.removeprefix(prefix))]


def staged_files(storage: Storage) -> list[FileEntry]:
    """The staged replays (an interrupted replay's), in path order."""
    return [e for e in storage.list(REPLAY_DIR) if e.rel.count("/") == 2 and e.rel.endswith(".json")]


# --- counting ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Tally:
    """One stream's committed dead letters."""

    stream: str
    raw_table: str
    location: str = ""  # the dead-letter folder ("" when the raw table is not registered)
    registered: bool = True
    letters: int = 0
    files: int = 0
    reasons: Mapping[str, int] = field(default_factory=dict)  # most frequent first
    oldest: str | None = None  # the oldest bucket holding a letter
    newest: str | None = None
    unreadable: tuple[str, ...] = ()  # files that are no dead letters: "<path>: <why>"
    pending: int = 0  # staged replays left by an interrupted one (the next replay finishes them)

    def to_dict(self) -> dict[str, Any]:
        return {
            "stream": self.stream,
            "raw_table": self.raw_table,
            "location": self.location,
            "registered": self.registered,
            "letters": self.letters,
            "files": self.files,
            "reasons": dict(self.reasons),
            "oldest_bucket": self.oldest,
            "newest_bucket": self.newest,
            "unreadable": list(self.unreadable),
            "pending_replays": self.pending,
        }


def count(storage: Storage, stream: Stream) -> Tally:
    """``stream``'s committed dead letters in its raw table at ``storage``, by reason."""
    entries = letter_files(storage)
    reasons: Counter[str] = Counter()
    buckets: set[str] = set()
    unreadable = []
    for entry, data in zip(entries, storage.read_many([e.rel for e in entries]), strict=True):
        try:
            letters = read_letters(entry.rel, data)
        except DeadLetterError as exc:
            unreadable.append(str(exc))
            continue
        reasons.update(letter.reason for _, letter in letters.letters)
        if letters.letters:
            buckets.add(letters.bucket)
    return Tally(
        stream=stream.name,
        raw_table=stream.raw_name,
        location=storage.uri(DEAD_LETTERS),
        letters=sum(reasons.values()),
        files=len(entries) - len(unreadable),
        reasons=_by_count(reasons),
        oldest=min(buckets, default=None),
        newest=max(buckets, default=None),
        unreadable=tuple(unreadable),
        pending=len(staged_files(storage)),
    )


def tally(settings: Settings, stream: Stream) -> Tally:
    """``stream``'s dead letters, its raw table loaded from the catalog (not registered: none)."""
    try:
        raw = open_raw(settings, stream)
    except TableNotFound:
        return Tally(stream.name, stream.raw_name, registered=False)
    try:
        return count(raw.storage, stream)
    except OSError as exc:
        raise DeadLetterError(f"reading {raw.storage.uri(DEAD_LETTERS)}: {exc}") from exc


# --- replay -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FilePlan:
    """What a replay does with one dead-letter file: the records that pass now, the letters that stay."""

    file: LetterFile
    records: tuple[str, ...]
    kept: tuple[dict[str, Any], ...]  # each with its reason now
    replayed: Mapping[str, int]  # the passing letters by the reason they had
    kept_by: Mapping[str, int]  # the letters that stay by their reason now
    changed: int  # letters that stay with another reason than they had

    @property
    def unchanged(self) -> bool:
        return not self.records and not self.changed

    @property
    def part(self) -> str:
        return f"{REPLAY_PREFIX}{self.file.token}-0{PART_SUFFIX}"

    def staged(self) -> Staged:
        return Staged(
            source=self.file.rel,
            sha256=hashlib.sha256(self.file.data).hexdigest(),
            letters=json_array([compact_json(k) for k in self.kept]).decode() if self.kept else None,
            part=self.part,
            records=json_array(self.records).decode(),
            replayed=dict(self.replayed),
        )


def plan(file: LetterFile, contract: RecordContract, max_bytes: int) -> FilePlan:
    """Each letter of ``file`` checked against ``contract`` as the job's validator checks a message."""
    records: list[str] = []
    kept: list[dict[str, Any]] = []
    replayed: Counter[str] = Counter()
    kept_by: Counter[str] = Counter()
    changed = 0
    for raw, letter in file.letters:
        try:
            records.append(message_record(letter.message(), contract, max_bytes))
        except Invalid as exc:
            reason = str(exc)
        except ValueError:  # a payload_base64 that is no base64: the letter is kept as it is
            reason = letter.reason
        else:
            replayed[letter.reason] += 1
            continue
        changed += reason != letter.reason
        kept.append(raw if reason == letter.reason else {**raw, "reason": reason})
        kept_by[reason] += 1
    return FilePlan(file, tuple(records), tuple(kept), dict(replayed), dict(kept_by), changed)


@dataclass
class ReplayReport:
    """What a replay did (or, dry, would do)."""

    stream: str
    raw_table: str
    schema: str  # the contract's schema: its source (digest)
    dry_run: bool
    location: str = ""  # the raw table's
    registered: bool = True
    files: int = 0  # dead-letter files read
    replayed: Counter[str] = field(default_factory=Counter)  # letters replayed, by the reason they had
    kept: Counter[str] = field(default_factory=Counter)  # letters kept, by their reason now
    changed: int = 0  # of the kept, those whose reason changed
    parts: list[str] = field(default_factory=list)  # part files written (under the raw location)
    rewritten: list[str] = field(default_factory=list)  # dead-letter files rewritten …
    deleted: list[str] = field(default_factory=list)  # … or deleted (nothing kept)
    finished: list[str] = field(default_factory=list)  # interrupted replays finished first (staged files)
    busy: list[str] = field(default_factory=list)  # files another replay is working on: left alone
    unreadable: list[str] = field(default_factory=list)  # "<path>: <why>"

    def to_dict(self) -> dict[str, Any]:
        return {
            "stream": self.stream,
            "raw_table": self.raw_table,
            "schema": self.schema,
            "dry_run": self.dry_run,
            "location": self.location,
            "registered": self.registered,
            "files": self.files,
            "replayed": sum(self.replayed.values()),
            "replayed_by_reason": _by_count(self.replayed),
            "kept": sum(self.kept.values()),
            "kept_by_reason": _by_count(self.kept),
            "reasons_changed": self.changed,
            "parts_written": self.parts,
            "dead_letter_files_rewritten": self.rewritten,
            "dead_letter_files_deleted": self.deleted,
            "interrupted_replays_finished": self.finished,
            "busy": self.busy,
            "unreadable": self.unreadable,
        }


def replay(settings: Settings, stream: Stream, *, dry_run: bool = False) -> ReplayReport:
    """Replay ``stream``'s dead letters against its current contract (:func:`replay_into`), its raw
    table loaded from the catalog (not registered: nothing to replay)."""
    try:
        raw = open_raw(settings, stream)
    except TableNotFound:
        return ReplayReport(stream.name, stream.raw_name, _schema(stream), dry_run, registered=False)
    try:
        return replay_into(raw.storage, stream, settings.kafka_max_message_bytes, dry_run=dry_run)
    except OSError as exc:  # (what was done stands; the next replay finishes what was under way)
        raise DeadLetterError(f"replaying {raw.storage.uri(DEAD_LETTERS)}: {exc}") from exc


def replay_into(
    storage: Storage, stream: Stream, max_bytes: int, *, dry_run: bool = False, now: datetime | None = None
) -> ReplayReport:
    """Replay the dead letters of the raw table at ``storage``: interrupted replays finished first, then
    each dead-letter file's letters checked against ``stream``'s contract, those that pass published as
    one part file, the others kept with their reason now (see the module's steps)."""
    report = ReplayReport(stream.name, stream.raw_name, _schema(stream), dry_run, location=storage.location)
    if not dry_run:
        for entry in staged_files(storage):
            finish(storage, entry, report, now)
    else:
        report.finished = [e.rel for e in staged_files(storage)]  # (would be)
    contract = RecordContract(stream.schema.contract())
    for entry in letter_files(storage):
        try:
            data = storage.read(entry.rel)
        except FileNotFoundError:  # gone since the listing: a concurrent replay emptied it
            continue
        try:
            planned = plan(read_letters(entry.rel, data), contract, max_bytes)
        except DeadLetterError as exc:
            report.unreadable.append(str(exc))
            continue
        report.files += 1
        if not dry_run and not _apply(storage, planned, report, now):
            continue
        report.replayed.update(planned.replayed)
        report.kept.update(planned.kept_by)
        report.changed += planned.changed
    return report


def _apply(storage: Storage, planned: FilePlan, report: ReplayReport, now: datetime | None) -> bool:
    """Steps 1–4 for one file; False when another replay is at it (left alone)."""
    if planned.unchanged:
        return True
    staged = planned.staged()
    rel = f"{REPLAY_DIR}/{planned.file.token}.json"
    if planned.records and not storage.create(rel, staged.model_dump_json().encode()):
        report.busy.append(planned.file.rel)
        return False
    _rewrite(storage, staged, report)
    if planned.records:
        report.parts.append(publish(storage, rel, staged, datetime.now(timezone.utc), now))
    return True


def _rewrite(storage: Storage, staged: Staged, report: ReplayReport) -> None:
    """Step 2: the dead-letter file with the letters that stay, or deleted."""
    if staged.letters is None:
        storage.delete_many([staged.source])  # (and its bucket's folder once empty, on local disks)
        report.deleted.append(staged.source)
    else:
        storage.write(staged.source, staged.letters.encode())
        report.rewritten.append(staged.source)


def publish(storage: Storage, rel: str, staged: Staged, since: datetime, now: datetime | None = None) -> str:
    """Steps 3 and 4: the staged records as the committed part file ``<bucket>/<part>`` — unless a
    bucket from ``since`` (the staging) less :data:`SKEW` on already holds it — then the staged file
    deleted; the part file's path under the raw location."""
    moment = now or datetime.now(timezone.utc)
    _, folders = storage.list_top(bucket_name(since - SKEW))
    for bucket in sorted(f for f in folders if bucket_time(f) is not None):
        if storage.exists(f"{bucket}/{staged.part}"):
            part = f"{bucket}/{staged.part}"
            break
    else:
        part = f"{bucket_name(moment)}/{staged.part}"
        storage.create(part, staged.records.encode())  # (False: a concurrent replay just wrote the same)
    storage.delete(rel)
    return part


def finish(storage: Storage, entry: FileEntry, report: ReplayReport, now: datetime | None = None) -> None:
    """An interrupted replay's remaining steps, from its staged file ``entry``."""
    try:
        staged = Staged.model_validate_json(storage.read(entry.rel))
    except ValidationError as exc:
        report.unreadable.append(f"{entry.rel}: not a staged replay: {exc.errors()[0]['msg']}")
        return
    source = storage.read(staged.source) if storage.exists(staged.source) else None
    if source is not None and hashlib.sha256(source).hexdigest() == staged.sha256:
        _rewrite(storage, staged, report)  # step 2 had not happened
    report.parts.append(publish(storage, entry.rel, staged, entry.mtime or datetime.now(timezone.utc), now))
    report.finished.append(entry.rel)
    report.replayed.update(staged.replayed)


def _by_count(counts: Mapping[str, int]) -> dict[str, int]:
    """Reasons → counts, the most frequent first (then by reason)."""
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def _schema(stream: Stream) -> str:
    return f"{stream.schema.source} ({stream.schema.digest})"
