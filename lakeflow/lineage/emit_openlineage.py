"""OpenLineage output: run events (JSON Lines, one event per line, as OpenLineage's file
transport writes them) for every Flink run and compaction run of the graph.

A run gets START at its start time and, once it has ended, COMPLETE (FINISHED), FAIL (FAILED,
with an ``errorMessage`` facet) or ABORT (CANCELED). A Flink job id is a UUID without dashes: it
is the run id. Datasets carry their aliases in the ``symlinks`` facet.
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timezone
from typing import Any, Optional

from lakeflow.lineage.graph import Graph
from lakeflow.lineage.openlineage import dataset, facet, run_event

TERMINAL = {"SUCCESS": "COMPLETE", "FAILURE": "FAIL", "SKIPPED": "ABORT"}


def events(graph: Graph, job_namespace: Optional[str] = None) -> list[dict[str, Any]]:
    aliases = {d.id: d.aliases for d in graph.datasets}
    out = []
    for r in graph.runs:
        props = dict(r.properties)
        ns = props.get("openlineage_namespace") or job_namespace or r.orchestrator  # a compaction keeps its own
        name = props.get("openlineage_name") or r.flow
        inputs = [dataset(d, aliases=aliases.get(d, ())) for d in r.inputs]
        outputs = [dataset(d, aliases=aliases.get(d, ())) for d in r.outputs]
        run_facets: dict[str, Any] = {"lakeflow_run": facet(
            "LakeflowRunFacet", state=r.state, restarts=r.restarts, records_in=r.io.records_in,
            records_out=r.io.records_out, bytes_in=r.io.bytes_in, bytes_out=r.io.bytes_out,
            processingType=r.process_type)}
        job_facets = {"jobType": facet("JobTypeJobFacet", processingType=r.process_type,
                                       integration=r.orchestrator.upper(), jobType="JOB")}
        common = dict(run_id=_uuid(r.run_id), job_namespace=ns, job_name=name, inputs=inputs, outputs=outputs,
                      job_facets=job_facets)
        if r.start_ms:
            out.append(run_event("START", event_time=_time(r.start_ms), run_facets=run_facets, **common))
        if r.result and r.end_ms:
            facets = dict(run_facets)
            if r.failure:
                facets["errorMessage"] = facet("ErrorMessageRunFacet", message=r.failure, programmingLanguage="JAVA")
            out.append(run_event(TERMINAL[r.result], event_time=_time(r.end_ms), run_facets=facets, **common))
    return sorted(out, key=lambda e: (e["eventTime"], e["run"]["runId"], e["eventType"] != "START"))


def _uuid(run_id: str) -> str:
    try:
        return str(uuid.UUID(run_id))
    except ValueError:
        return str(uuid.uuid5(uuid.NAMESPACE_URL, run_id))


def _time(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc)


def dumps(events_: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(e, sort_keys=True) + "\n" for e in events_)
