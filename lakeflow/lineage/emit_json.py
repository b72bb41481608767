"""The neutral JSON document: ``jobs`` (one per job id: job_id, name, state, inputs, outputs,
unresolved, …), ``runs``, ``datasets`` (with their ``schema``: the columns as the OpenLineage schema
facet lists them, empty when unknown), ``edges``, ``flows``, ``tasks`` (operators with
``--operator-granularity vertex``), ``failed_jobs`` and ``removed``. Keys and lists sorted (columns
in their order): identical harvests give identical bytes. It holds everything the picture shows, so
``lakeflow lineage view`` renders a saved harvest (:mod:`lakeflow.lineage.render`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from lakeflow.lineage.graph import COMPACTION, Graph


def document(graph: Graph, removed: Sequence[str] = ()) -> dict[str, Any]:
    return {
        "jobs": [
            {
                "engine": j.engine,
                "job_id": j.job_id,
                "name": j.name,
                "state": j.state,
                "inputs": [str(d) for d in j.inputs],
                "outputs": [str(d) for d in j.outputs],
                "unresolved": list(j.unresolved),
                "skipped": list(j.skipped),
                "evidence": {d: e for d, e in j.evidence},
            }
            for j in graph.jobs
        ],
        "runs": [
            {
                "engine": r.orchestrator,
                "run_id": r.run_id,
                "flow": r.flow,
                "state": r.state,
                "result": r.result,
                "type": r.process_type,
                "start_ms": r.start_ms,
                "end_ms": r.end_ms,
                "restarts": r.restarts,
                "failure": r.failure,
                **asdict(r.io),
                "inputs": [str(d) for d in r.inputs],
                "outputs": [str(d) for d in r.outputs],
                "task": r.task,
                "url": r.url,
                "properties": dict(r.properties),
            }
            for r in graph.runs
        ],
        "datasets": [
            {
                "name": str(d.id),
                "namespace": d.id.namespace,
                "path": d.id.name,
                "aliases": [str(a) for a in d.aliases],
                "platform_instance": d.platform_instance,
                "schema": [c.facet() for c in d.schema],
            }
            for d in graph.datasets
        ],
        "edges": [list(e) for e in graph.edges()],
        "flows": [
            {
                "engine": f.orchestrator,
                "name": f.name,
                "description": f.description,
                "url": f.url,
                "properties": dict(f.properties),
            }
            for f in graph.flows
        ],
        "tasks": [
            {
                "engine": t.orchestrator,
                "flow": t.flow,
                "id": t.id,
                "name": t.name,
                "type": t.process_type,
                "inputs": [str(d) for d in t.inputs],
                "outputs": [str(d) for d in t.outputs],
                "upstream": list(t.upstream),
                "properties": dict(t.properties),
            }
            for t in graph.tasks
        ],
        "failed_jobs": [{"job_id": jid, "error": err} for jid, err in graph.failed_jobs],
        "removed": sorted(removed),
    }


def dumps(graph: Graph, removed: Sequence[str] = ()) -> str:
    return json.dumps(document(graph, removed), indent=2, sort_keys=True) + "\n"


def with_compaction_runs(doc: dict[str, Any], store: dict[str, Any]) -> dict[str, Any]:
    """A harvest's document with its Spark (compaction) part replaced by ``store``'s (a document
    built from the lineage store alone, newer than the harvest). The store's datasets fold into
    the harvest's when one names the other (as name or alias)."""
    canonical: dict[str, str] = {}
    for d in doc.get("datasets") or ():
        canonical[d["name"]] = d["name"]
        for a in d.get("aliases") or ():
            canonical.setdefault(a, d["name"])
    rename: dict[str, str] = {}
    for d in store.get("datasets") or ():
        known = next((canonical[n] for n in [d["name"], *(d.get("aliases") or ())] if n in canonical), None)
        rename[d["name"]] = known or d["name"]

    def r(names):
        return sorted({rename.get(n, n) for n in names})

    def node(name: str) -> str:
        return f"dataset:{rename.get(name[8:], name[8:])}" if name.startswith("dataset:") else name

    replaced = {f"{COMPACTION}:{f['name']}" for f in doc.get("flows") or () if f["engine"] == COMPACTION}
    replaced |= {f"{COMPACTION}:{j['name']}" for j in doc.get("jobs") or () if j["engine"] == COMPACTION}
    out = dict(doc)
    out["jobs"] = [j for j in doc.get("jobs") or () if j["engine"] != COMPACTION] + [
        {
            **j,
            "inputs": r(j["inputs"]),
            "outputs": r(j["outputs"]),
            "evidence": {rename.get(k, k): v for k, v in (j.get("evidence") or {}).items()},
        }
        for j in store.get("jobs") or ()
    ]
    out["runs"] = [x for x in doc.get("runs") or () if x["engine"] != COMPACTION] + [
        {**x, "inputs": r(x["inputs"]), "outputs": r(x["outputs"])} for x in store.get("runs") or ()
    ]
    out["flows"] = [f for f in doc.get("flows") or () if f["engine"] != COMPACTION] + list(store.get("flows") or ())
    out["tasks"] = [t for t in doc.get("tasks") or () if t["engine"] != COMPACTION] + [
        {**t, "inputs": r(t["inputs"]), "outputs": r(t["outputs"])} for t in store.get("tasks") or ()
    ]
    edges = {tuple(e) for e in doc.get("edges") or () if e[0] not in replaced and e[1] not in replaced}
    edges |= {(node(a), node(b)) for a, b in store.get("edges") or ()}
    out["edges"] = [list(e) for e in sorted(edges)]
    datasets = {d["name"]: dict(d) for d in doc.get("datasets") or ()}
    for d in store.get("datasets") or ():
        name = rename[d["name"]]
        if name in datasets:
            aliases = set(datasets[name].get("aliases") or ()) | set(d.get("aliases") or ())
            if d["name"] != name:
                aliases.add(d["name"])
            datasets[name]["aliases"] = sorted(aliases)
            if d.get("schema"):  # the store's compaction runs describe it, newer
                datasets[name]["schema"] = d["schema"]
        else:
            datasets[name] = dict(d)
    out["datasets"] = [datasets[n] for n in sorted(datasets)]
    for key in ("jobs", "runs", "flows", "tasks"):
        out[key] = sorted(out[key], key=lambda x: json.dumps(x, sort_keys=True))
    return out
