"""DataHub output: MetadataChangeProposals, to a file (the JSON array DataHub's ``file`` source
reads) or to a GMS over REST (``POST /aspects?action=ingestProposalBatch``).

URNs: ``urn:li:dataFlow:(flink,<job name>,<env>)``, ``urn:li:dataJob:(<flow>,<job name | vertex id>)``,
``urn:li:dataProcessInstance:<guid>`` (DataHub's guid of orchestrator, cluster = env and the
run id: a Flink job id or a compaction run id), datasets from :mod:`lakeflow.lineage.datasets`.

A dataset with columns gets a ``schemaMetadata`` aspect. Its field paths are DataHub's v2 paths
(``[version=2.0].[type=struct].[type=struct].gps.[type=double].lat``), as DataHub's Iceberg source
writes them: a v1 path (``gps.lat``) cannot tell a struct's field from a list's element's
(``samples.x``) nor a map's value's, and one schema's paths are all of one version.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from typing import Any

from lakeflow.errors import LakeflowError
from lakeflow.lineage.columns import LISTS, MAPS, STRUCTS, Column
from lakeflow.lineage.datasets import DatasetId
from lakeflow.lineage.graph import Dataset, Graph, Run
from lakeflow.secret import Secret, redact_url

ACTOR = "urn:li:corpuser:datahub"
BATCH = 100
UNKNOWN_STAMP = {"time": 0, "actor": "urn:li:corpuser:unknown"}  # DataHub's default audit stamp
V2_ROOT = "[version=2.0].[type=struct]"
# json.dumps(..., sort_keys=True) and its compact form, each encoder made once (dumps makes one a call)
SORTED_JSON = json.JSONEncoder(sort_keys=True).encode
COMPACT_JSON = json.JSONEncoder(sort_keys=True, separators=(",", ":")).encode
# a column type's first word → DataHub's type (com.linkedin.schema.*); a time type: TimeType; else NullType
FIELD_TYPES = {
    **dict.fromkeys(("string", "varchar", "char", "text", "uuid"), "StringType"),
    **dict.fromkeys(
        ("int", "integer", "long", "bigint", "smallint", "tinyint", "float", "double", "real", "decimal", "numeric"),
        "NumberType",
    ),
    **dict.fromkeys(("boolean", "bool"), "BooleanType"),
    "date": "DateType",
    **dict.fromkeys(("binary", "varbinary", "bytes", "fixed"), "BytesType"),
    **dict.fromkeys(STRUCTS, "RecordType"),
    **dict.fromkeys(LISTS, "ArrayType"),
    **dict.fromkeys(MAPS, "MapType"),
}


class EmitError(LakeflowError, RuntimeError):
    """The DataHub GMS refused the proposals or could not be reached."""


def _enc(text: str) -> str:
    """DataHub's URN encoding of reserved characters in ids."""
    return text.replace("%", "%25").replace(",", "%2C").replace("(", "%28").replace(")", "%29")


class Urns:
    def __init__(self, env: str, platform_instance: str | None, instances: dict[DatasetId, str | None]) -> None:
        self.env, self.instance, self.instances = env, platform_instance, instances

    def flow(self, orchestrator: str, flow: str) -> str:
        fid = f"{self.instance}.{flow}" if self.instance else flow
        return f"urn:li:dataFlow:({orchestrator},{_enc(fid)},{self.env})"

    def task(self, orchestrator: str, flow: str, task: str) -> str:
        return f"urn:li:dataJob:({self.flow(orchestrator, flow)},{_enc(task)})"

    def run(self, r: Run) -> str:
        key = COMPACT_JSON({"cluster": self.env, "id": r.run_id, "orchestrator": r.orchestrator})
        return f"urn:li:dataProcessInstance:{hashlib.md5(key.encode()).hexdigest()}"

    def dataset(self, d: DatasetId) -> str:
        return d.datahub_urn(self.env, self.instances.get(d))


def _mcp(entity_type: str, urn: str, aspect_name: str, aspect: dict[str, Any]) -> dict[str, Any]:
    return {
        "entityType": entity_type,
        "entityUrn": urn,
        "changeType": "UPSERT",
        "aspectName": aspect_name,
        "aspect": {"value": SORTED_JSON(aspect), "contentType": "application/json"},
    }


def proposals(
    graph: Graph, env: str = "PROD", platform_instance: str | None = None, removed: Sequence[str] = ()
) -> list[dict[str, Any]]:
    """Every MCP of the graph (and a ``status removed`` for each stale URN), in a stable order."""
    u = Urns(env, platform_instance, {d.id: d.platform_instance for d in graph.datasets})
    out: list[dict[str, Any]] = []
    for f in graph.flows:
        urn = u.flow(f.orchestrator, f.name)
        info: dict[str, Any] = {"name": f.name, "description": f.description, "customProperties": dict(f.properties)}
        if f.url:
            info["externalUrl"] = f.url
        out.append(_mcp("dataFlow", urn, "dataFlowInfo", info))
        out.extend(_platform_instance("dataFlow", urn, f.orchestrator, platform_instance))
        out.append(_mcp("dataFlow", urn, "status", {"removed": False}))
    for t in graph.tasks:
        urn = u.task(t.orchestrator, t.flow, t.id)
        out.append(
            _mcp(
                "dataJob",
                urn,
                "dataJobInfo",
                {
                    "name": t.name,
                    "type": {"string": t.process_type},
                    "customProperties": dict(t.properties),
                    "flowUrn": u.flow(t.orchestrator, t.flow),
                },
            )
        )
        out.append(
            _mcp(
                "dataJob",
                urn,
                "dataJobInputOutput",
                {
                    "inputDatasets": [u.dataset(d) for d in t.inputs],
                    "outputDatasets": [u.dataset(d) for d in t.outputs],
                    "inputDatajobs": [u.task(t.orchestrator, t.flow, x) for x in t.upstream],
                },
            )
        )
        out.extend(_platform_instance("dataJob", urn, t.orchestrator, platform_instance))
        out.append(_mcp("dataJob", urn, "status", {"removed": False}))
    for d in graph.datasets:
        urn = u.dataset(d.id)
        name = urn.split(",", 1)[1].rsplit(",", 1)[0]
        out.append(
            _mcp(
                "dataset",
                urn,
                "datasetKey",
                {"platform": f"urn:li:dataPlatform:{d.id.platform}", "name": name, "origin": env},
            )
        )
        if d.schema:
            out.append(_mcp("dataset", urn, "schemaMetadata", schema_metadata(d, name)))
    for r in graph.runs:
        out.extend(_run(u, r))
    for urn in sorted(removed):
        out.append(_mcp(urn.split(":")[2], urn, "status", {"removed": True}))
    return out


def schema_metadata(d: Dataset, name: str) -> dict[str, Any]:
    """The ``schemaMetadata`` aspect of a dataset with columns (``name``: its name in its URN): the
    columns' JSON as the raw schema (``OtherSchema``), its SHA-1 as the hash, a field per column and
    per field of a struct (of a list's or map's structs too)."""
    raw = COMPACT_JSON([c.facet() for c in d.schema])
    return {
        "schemaName": name,
        "platform": f"urn:li:dataPlatform:{d.id.platform}",
        "version": 0,
        "created": UNKNOWN_STAMP,
        "lastModified": UNKNOWN_STAMP,
        "hash": hashlib.sha1(raw.encode(), usedforsecurity=False).hexdigest(),
        "platformSchema": {"com.linkedin.schema.OtherSchema": {"rawSchema": raw}},
        "fields": _schema_fields(d.schema, V2_ROOT),
    }


def _schema_fields(columns: Sequence[Column], parent: str) -> list[dict[str, Any]]:
    out = []
    for c in columns:
        path = f"{parent}.{_path_types(c)}.{c.name}"
        field: dict[str, Any] = {
            "fieldPath": path,
            "nullable": not c.type.rstrip().upper().endswith("NOT NULL"),  # a table's columns are, unless said
            "type": {"type": {f"com.linkedin.schema.{_field_type(c)}": _type_details(c)}},
            "nativeDataType": c.type,
            "recursive": False,
            "isPartOfKey": False,
        }
        if c.description:
            field["description"] = c.description
        out.append(field)
        out.extend(_schema_fields(c.members, path))
    return out


def _path_types(c: Column) -> str:
    """A column's types in a v2 path: ``[type=long]``, ``[type=struct]``, ``[type=array].[type=struct]``,
    ``[type=map].[type=double]`` (a map's value)."""
    if c.kind in LISTS:
        return f"[type=array].{_path_types(c.element)}"
    if c.kind in MAPS:
        return f"[type=map].{_path_types(c.value)}"
    return "[type=struct]" if c.kind in STRUCTS else f"[type={c.kind or 'null'}]"


def _field_type(c: Column) -> str:
    return "TimeType" if c.kind.startswith("time") else FIELD_TYPES.get(c.kind, "NullType")


def _type_details(c: Column) -> dict[str, Any]:
    if c.kind in LISTS and c.element.type:
        return {"nestedType": [c.element.type]}
    if c.kind in MAPS:
        return {k: v for k, v in (("keyType", c.key.type), ("valueType", c.value.type)) if v}
    return {}


def _platform_instance(entity_type: str, urn: str, platform: str, instance: str | None) -> list[dict[str, Any]]:
    if not instance:
        return []
    p = f"urn:li:dataPlatform:{platform}"
    return [
        _mcp(
            entity_type,
            urn,
            "dataPlatformInstance",
            {"platform": p, "instance": f"urn:li:dataPlatformInstance:({p},{_enc(instance)})"},
        )
    ]


def _run(u: Urns, r: Run) -> list[dict[str, Any]]:
    urn = u.run(r)
    props = dict(r.properties)
    props.update(
        {
            "state": r.state,
            "restarts": str(r.restarts),
            "records_in": str(r.io.records_in),
            "records_out": str(r.io.records_out),
            "bytes_in": str(r.io.bytes_in),
            "bytes_out": str(r.io.bytes_out),
        }
    )
    if r.failure:
        props["failure"] = r.failure
    info: dict[str, Any] = {
        "name": r.run_id,
        "customProperties": props,
        "type": "STREAMING" if r.process_type == "STREAMING" else "BATCH_SCHEDULED",
        "created": {"time": r.start_ms or 0, "actor": ACTOR},
    }
    if r.url:
        info["externalUrl"] = r.url
    out = [
        _mcp("dataProcessInstance", urn, "dataProcessInstanceProperties", info),
        _mcp(
            "dataProcessInstance",
            urn,
            "dataProcessInstanceRelationships",
            {"parentTemplate": u.task(r.orchestrator, r.flow, r.task), "upstreamInstances": []},
        ),
        _mcp("dataProcessInstance", urn, "dataProcessInstanceInput", {"inputs": [u.dataset(d) for d in r.inputs]}),
        _mcp("dataProcessInstance", urn, "dataProcessInstanceOutput", {"outputs": [u.dataset(d) for d in r.outputs]}),
    ]
    partition = {"partition": "FULL_TABLE_SNAPSHOT", "type": "FULL_TABLE"}
    if r.start_ms:
        out.append(
            _mcp(
                "dataProcessInstance",
                urn,
                "dataProcessInstanceRunEvent",
                {"timestampMillis": r.start_ms, "partitionSpec": partition, "status": "STARTED"},
            )
        )
    if r.result and r.end_ms:
        end: dict[str, Any] = {
            "timestampMillis": r.end_ms,
            "partitionSpec": partition,
            "status": "COMPLETE",
            "result": {"type": r.result, "nativeResultType": r.orchestrator},
        }
        if r.start_ms:
            end["durationMillis"] = r.end_ms - r.start_ms
        out.append(_mcp("dataProcessInstance", urn, "dataProcessInstanceRunEvent", end))
    return out


def dumps(mcps: Iterable[dict[str, Any]]) -> str:
    """The file the DataHub ``file`` source reads: a JSON array of MCPs, one a line (written by
    the C encoder, which ``indent`` would replace by the pure-Python one)."""
    return "[\n" + ",\n".join(map(SORTED_JSON, mcps)) + "\n]\n"


def send(
    mcps: Sequence[dict[str, Any]],
    gms_url: str,
    token: Secret | None = None,
    timeout_s: float = 30.0,
    max_retries: int = 3,
) -> int:
    """POST the MCPs to a DataHub GMS in batches; returns how many were accepted."""
    import requests

    from lakeflow.http import HttpOptions, new_session

    session = new_session(HttpOptions(timeout=timeout_s, max_retries=max_retries))
    session.headers.update({"X-RestLi-Protocol-Version": "2.0.0", "Content-Type": "application/json"})
    if token:
        session.headers["Authorization"] = f"Bearer {token.reveal()}"
    url = f"{gms_url.rstrip('/')}/aspects?action=ingestProposalBatch"
    shown = redact_url(url)
    sent = 0
    try:
        for i in range(0, len(mcps), BATCH):
            batch = list(mcps[i : i + BATCH])
            try:
                response = session.post(url, data=json.dumps({"proposals": batch}))
            except requests.RequestException as exc:  # after the session's retries
                raise EmitError(f"DataHub GMS POST {shown}: {type(exc).__name__}: {str(exc)[:300]}") from exc
            if response.status_code >= 400:
                raise EmitError(f"DataHub GMS POST {shown}: HTTP {response.status_code}: {response.text[:300]}")
            sent += len(batch)
    finally:
        session.close()
    return sent
