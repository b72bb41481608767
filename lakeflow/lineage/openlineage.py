"""OpenLineage run events: the model lakeflow writes (compaction) and reads (harvester).

A lineage store is a directory of event files, one JSON ``RunEvent`` per file, named
``<eventTime>-<runId>-<eventType>.json`` and written atomically (temp file + rename), so a reader
never sees half an event. Spec: https://openlineage.io/spec/2-0-2/OpenLineage.json
"""

from __future__ import annotations

import json
import logging
import os
import re
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator, Mapping, Optional, Sequence

from lakeflow import __version__
from lakeflow.lineage.datasets import DatasetId

log = logging.getLogger(__name__)

PRODUCER = f"https://github.com/lakeflow/lakeflow/tree/v{__version__}"
SCHEMA_URL = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
FACET_SCHEMA = "https://openlineage.io/spec/facets/1-0-0/"
EVENT_TYPES = ("START", "RUNNING", "COMPLETE", "ABORT", "FAIL", "OTHER")


def facet(name: str, **fields: Any) -> dict[str, Any]:
    """An OpenLineage facet body with the required ``_producer`` / ``_schemaURL``."""
    return {"_producer": PRODUCER, "_schemaURL": f"{FACET_SCHEMA}{name}.json", **fields}


def dataset(ds: DatasetId, facets: Optional[Mapping[str, Any]] = None,
            aliases: Sequence[DatasetId] = ()) -> dict[str, Any]:
    """A dataset entry; ``aliases`` (e.g. the Lakekeeper identity) go into the symlinks facet."""
    all_facets = dict(facets or {})
    if aliases:
        all_facets["symlinks"] = facet("SymlinksDatasetFacet", identifiers=[
            {"namespace": a.namespace, "name": a.name, "type": "TABLE"} for a in aliases])
    return {"namespace": ds.namespace, "name": ds.name, "facets": all_facets}


def run_event(event_type: str, *, run_id: str, job_namespace: str, job_name: str,
              event_time: Optional[datetime] = None, inputs: Sequence[Mapping[str, Any]] = (),
              outputs: Sequence[Mapping[str, Any]] = (), run_facets: Optional[Mapping[str, Any]] = None,
              job_facets: Optional[Mapping[str, Any]] = None) -> dict[str, Any]:
    """A RunEvent as a plain JSON-able dict."""
    if event_type not in EVENT_TYPES:
        raise ValueError(f"event type {event_type!r}: expected one of {', '.join(EVENT_TYPES)}")
    when = (event_time or datetime.now(timezone.utc)).astimezone(timezone.utc)
    return {
        "eventType": event_type,
        "eventTime": when.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "run": {"runId": run_id, "facets": dict(run_facets or {})},
        "job": {"namespace": job_namespace, "name": job_name, "facets": dict(job_facets or {})},
        "inputs": list(inputs),
        "outputs": list(outputs),
        "producer": PRODUCER,
        "schemaURL": SCHEMA_URL,
    }


def write_event(directory: Path, event: Mapping[str, Any]) -> Path:
    """Write one event atomically into the lineage store; returns its path."""
    directory.mkdir(parents=True, exist_ok=True)
    stamp = re.sub(r"[^0-9TZ]", "", event["eventTime"])
    path = directory / f"{stamp}-{event['run']['runId']}-{event['eventType']}.json"
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".", suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        json.dump(event, f, sort_keys=True, indent=1)
    os.replace(tmp, path)
    return path


def read_events(directory: Path) -> Iterator[dict[str, Any]]:
    """Every readable event in the store, oldest first; unreadable files are logged and skipped."""
    if not directory.is_dir():
        return
    for path in sorted(directory.glob("*.json")):
        try:
            event = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            log.warning("skipping unreadable lineage event %s: %s", path.name, exc)
            continue
        if isinstance(event, dict) and "run" in event and "job" in event:
            yield event
        else:
            log.warning("skipping %s: not an OpenLineage run event", path.name)
