"""One compaction task: some part files → staged data files, bad records set aside, and what each file
held. The arrow engine runs one task over the whole batch in the driver; the Spark engine one per
balanced share of the batch in its executors (:mod:`lakeflow.compaction.spark.tasks`).

Imports no pyspark: it runs in Spark's Python workers.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from lakeflow.compaction.engine import RECORDS_FILE, WritePlan
from lakeflow.compaction.files import FileEntry, Storage
from lakeflow.compaction.parse import FILE, FileSummary, Parsed, Parser
from lakeflow.compaction.rows import KEY_HASH, Writer, WrittenFile, key_hashes

SHARE_FILES = 1024  # files a thread reads and parses at a time


@dataclass
class TaskResult:
    """What a task did: each file's summary (by file id), its data files, bad records, duplicates it
    dropped, undeclared fields seen; with ``written_hashes``: each written row's key hash, file id and data file."""

    files: dict[int, FileSummary] = field(default_factory=dict)
    written: list[WrittenFile] = field(default_factory=list)
    bad_records: int = 0
    duplicates_dropped: int = 0
    undeclared: Counter[str] = field(default_factory=Counter)
    written_hashes: pa.Table | None = None
    # the Spark engine's small batches: the written rows' key hashes, their files (ids) and data files
    hashes: np.ndarray | None = None
    hash_files: np.ndarray | None = None
    hash_written: np.ndarray | None = None
    # … a large batch's: the file of its sorted hashes (staging-relative) and where each hash range starts
    hash_file: str = ""
    hash_cuts: list[int] = field(default_factory=list)


def file_ids(parts: Sequence[FileEntry]) -> dict[str, int]:
    """Each file's id: its rank by size, largest first (ties: in ``parts`` order). A key read twice keeps
    the record of the lowest id — the larger file's."""
    order = sorted(range(len(parts)), key=lambda i: (-parts[i].size, i))
    return {parts[i].rel: n for n, i in enumerate(order)}


def parse_files(
    files: Sequence[tuple[int, str]], raw: Storage, parser: Parser, threads: int = 1, key: Sequence[str] = ()
) -> Parsed:
    """Read and parse ``files`` (file id, raw-relative path); rows' :data:`FILE` is the file id; with a
    ``key``, each row's :func:`key_hashes` too. With ``threads`` > 1, shares of the files are read, parsed
    and hashed at once (the decoders, pyarrow and numpy let go of the GIL)."""
    if threads <= 1 or len(files) <= SHARE_FILES:
        return _parse_share(files, raw, parser, key)
    shares = [files[i : i + SHARE_FILES] for i in range(0, len(files), SHARE_FILES)]
    with ThreadPoolExecutor(threads) as pool:
        parts = list(pool.map(lambda share: _parse_share(share, raw, parser, key), shares))
    kept = [p for p in parts if p.rows.num_rows]
    out = Parsed(rows=pa.concat_tables([p.rows for p in kept]) if kept else parser.empty(), files={})
    if key:
        out.hashes = np.concatenate([p.hashes for p in kept if p.hashes is not None] or [np.zeros(0, np.uint64)])
    for part in parts:
        out.files.update(part.files)
        out.bad.extend(part.bad)
        out.undeclared.update(part.undeclared)
    return out


def _parse_share(files: Sequence[tuple[int, str]], raw: Storage, parser: Parser, key: Sequence[str]) -> Parsed:
    rels = [rel for _, rel in files]
    if raw.is_local:  # (the compiled decoder reads local files itself)
        parsed = parser.parse_local(
            [raw.local_path(rel) for rel in rels], lambda i: raw.read_many([rels[n] for n in i])
        )
    else:
        parsed = parser.parse(raw.read_many(rels))
    ids = [file_id for file_id, _ in files]
    if parsed.rows.num_rows:
        by_index = pa.array(ids, pa.int32()).take(parsed.rows.column(FILE))
        parsed.rows = parsed.rows.set_column(parsed.rows.column_names.index(FILE), FILE, by_index)
    parsed.files = {ids[i]: s for i, s in parsed.files.items()}
    parsed.bad = [type(b)(ids[b.file], b.reason, b.text) for b in parsed.bad]
    if key:
        parsed.hashes = key_hashes(parsed.rows.select(list(key)))
    return parsed


def write_bad_records(
    parsed: Parsed, names: dict[int, str], raw: Storage, target: Storage, plan: WritePlan, task: int
) -> int:
    """The bad records as JSON lines ``{"file"`` (the raw file's URI), ``"reason", "record"}`` (``record``:
    the text as sent) in the run's records folder of the Iceberg table (``target``); how many."""
    if not parsed.bad:
        return 0
    lines = [
        json.dumps({"file": raw.uri(names[b.file]), "reason": b.reason, "record": b.text}, ensure_ascii=False)
        for b in parsed.bad
    ]
    target.write(f"{plan.records}/{RECORDS_FILE.format(task=task)}", ("\n".join(lines) + "\n").encode())
    return len(lines)


def run_task(
    number: int,
    attempt: int,
    files: Sequence[tuple[int, str]],
    raw: Storage,
    target: Storage,
    plan: WritePlan,
    *,
    keys: bool = False,
) -> TaskResult:
    """Task ``number`` (attempt ``attempt``) of a batch: ``files`` parsed, bad records written,
    de-duplicated within the task, written into the staging folder (names carry the task and attempt,
    so a retried or speculative attempt never overwrites another's files)."""
    parser = Parser(plan.schema)
    parsed = parse_files(files, raw, parser, key=plan.schema.key)
    writer = Writer(plan.schema, plan.table_schema, plan.spec, dict(plan.properties), target)
    bad = write_bad_records(parsed, dict(files), raw, target, plan, number)
    rows = parsed.rows
    if keys:  # the written rows' key hashes: the parse's, carried through de-duplication and the sort
        assert parsed.hashes is not None
        rows = rows.append_column(KEY_HASH, pa.array(parsed.hashes.view(np.int64)))
    rows = writer.first_per_key(rows, parsed.hashes)
    collected: list[pa.Table] | None = [] if keys else None
    written = writer.write(
        rows, plan.file_count(rows.num_rows), plan.staging, f"part-t{number:05d}-a{attempt}", collected
    )
    return TaskResult(
        files=parsed.files,
        written=written,
        bad_records=bad,
        duplicates_dropped=parsed.rows.num_rows - rows.num_rows,
        undeclared=parsed.undeclared,
        written_hashes=pa.concat_tables(collected) if collected else None,
    )
