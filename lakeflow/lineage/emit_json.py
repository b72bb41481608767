"""The neutral JSON document: ``jobs`` (one per job id: job_id, name, state, inputs, outputs,
unresolved, …), ``runs``, ``datasets``, ``edges``, ``failed_jobs`` and ``removed``. Keys and lists
sorted: identical harvests give identical bytes."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any, Sequence

from lakeflow.lineage.graph import Graph


def document(graph: Graph, removed: Sequence[str] = ()) -> dict[str, Any]:
    return {
        "jobs": [{
            "engine": j.engine, "job_id": j.job_id, "name": j.name, "state": j.state,
            "inputs": [str(d) for d in j.inputs], "outputs": [str(d) for d in j.outputs],
            "unresolved": list(j.unresolved), "skipped": list(j.skipped),
            "evidence": {d: e for d, e in j.evidence},
        } for j in graph.jobs],
        "runs": [{
            "engine": r.orchestrator, "run_id": r.run_id, "flow": r.flow, "state": r.state, "result": r.result,
            "type": r.process_type, "start_ms": r.start_ms, "end_ms": r.end_ms, "restarts": r.restarts,
            "failure": r.failure, **asdict(r.io),
            "inputs": [str(d) for d in r.inputs], "outputs": [str(d) for d in r.outputs],
        } for r in graph.runs],
        "datasets": [{"name": str(d.id), "namespace": d.id.namespace, "path": d.id.name,
                      "aliases": [str(a) for a in d.aliases], "platform_instance": d.platform_instance}
                     for d in graph.datasets],
        "edges": [list(e) for e in graph.edges()],
        "failed_jobs": [{"job_id": jid, "error": err} for jid, err in graph.failed_jobs],
        "removed": sorted(removed),
    }


def dumps(graph: Graph, removed: Sequence[str] = ()) -> str:
    return json.dumps(document(graph, removed), indent=2, sort_keys=True) + "\n"
