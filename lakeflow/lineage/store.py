"""The lineage store: a directory of OpenLineage run events, one JSON ``RunEvent`` per file.

Files are named ``<eventTime>-<runId>-<eventType>.json`` and written atomically (temp file +
rename), so a reader never sees half an event; they are ``rw-r-----`` (``FILE_MODE``, as lakeflow's
Flink listener writes them): a harvest running as another user of the folder's group reads them. This module reads and writes plain JSON only (no
OpenLineage library import: ``lakeflow harvest`` reads the store and must start fast); events are
built with openlineage-python in :mod:`lakeflow.lineage.openlineage`.
"""

from __future__ import annotations

import json
import logging
import os
import re
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

FILE_MODE = 0o640  # the owner writes, the group reads
JOB_NAMESPACE = "flink"  # lakeflow's listener's, and the harvest's own OpenLineage namespace for Flink jobs

log = logging.getLogger(__name__)
_LIFECYCLE = {"START": 0, "RUNNING": 1}  # then the run's end: COMPLETE, FAIL or ABORT
_WHOLE_SECOND = re.compile(r"^(\d{8}T\d{6})Z")


def write(directory: Path, event: Mapping[str, Any]) -> Path:
    """Write one event (its JSON document) atomically into the store; returns its path."""
    directory.mkdir(parents=True, exist_ok=True)
    stamp = re.sub(r"[^0-9TZ]", "", str(event["eventTime"]))
    path = directory / f"{stamp}-{event['run']['runId']}-{event['eventType']}.json"
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".", suffix=".tmp")
    os.fchmod(fd, FILE_MODE)
    with os.fdopen(fd, "w") as f:
        json.dump(event, f, sort_keys=True, indent=1)
    os.replace(tmp, path)
    return path


def read_events(directory: Path) -> Iterator[dict[str, Any]]:
    """Every readable event in the store, oldest first; unreadable files are logged and skipped."""
    if not directory.is_dir():
        return
    for path in sorted(directory.glob("*.json"), key=_age):
        try:
            event = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            log.warning("skipping unreadable lineage event %s: %s", path.name, exc)
            continue
        if isinstance(event, dict) and "run" in event and "job" in event:
            yield event
        else:
            log.warning("skipping %s: not an OpenLineage run event", path.name)


def _age(path: Path) -> tuple[str, int, str]:
    """Where an event file sorts, oldest first: by its time and run, then a run's START before the events
    that follow it when they share a time (their names alone would put COMPLETE first). A whole second
    named without its milliseconds (as earlier listeners wrote it) sorts as ``.000``."""
    head, _, kind = path.stem.rpartition("-")
    return _WHOLE_SECOND.sub(r"\g<1>000Z", head, count=1), _LIFECYCLE.get(kind, len(_LIFECYCLE)), kind


def is_flink(event: Mapping[str, Any]) -> bool:
    """Whether a stored event is a Flink run's (lakeflow's listener's), not a compaction's."""
    job = event.get("job") or {}
    integration = ((job.get("facets") or {}).get("jobType") or {}).get("integration")
    return job.get("namespace") == JOB_NAMESPACE or str(integration).upper() == "FLINK"
