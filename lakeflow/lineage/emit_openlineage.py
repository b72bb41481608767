"""OpenLineage output: run events for every Flink run and compaction run of the graph, built with
openlineage-python; written as JSON Lines through its ``FileTransport`` (one event per line) and,
with ``--openlineage-url``, posted through its ``HttpTransport`` to a Marquez- or
DataHub-compatible endpoint.

A run gets START at its start time and, once it has ended, COMPLETE (FINISHED), FAIL (FAILED,
with an ``errorMessage`` facet) or ABORT (CANCELED). A Flink job id is a UUID without dashes: it
is the run id. Datasets carry their aliases in the ``symlinks`` facet and their columns in the
``schema`` facet.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime, timezone
from functools import partial

from lakeflow.errors import LakeflowError
from lakeflow.lineage.datasets import DatasetId
from lakeflow.lineage.emit_datahub import EmitError
from lakeflow.lineage.graph import Graph
from lakeflow.lineage.openlineage import (
    PRODUCER,
    Dataset,
    LakeflowRunFacet,
    RunEvent,
    RunFacet,
    RunState,
    dataset,
    error_message,
    job_type,
    run_event,
    schema,
)
from lakeflow.secret import Secret, redact_url

TERMINAL = {"SUCCESS": "COMPLETE", "FAILURE": "FAIL", "SKIPPED": "ABORT"}
MARQUEZ_ENDPOINT = "api/v1/lineage"


def events(graph: Graph, job_namespace: str | None = None) -> list[RunEvent]:
    known = {d.id: d for d in graph.datasets}

    def ds(d: DatasetId) -> Dataset:
        g = known.get(d)
        return dataset(d, {"schema": schema(g.schema)} if g and g.schema else None, g.aliases if g else ())

    out = []
    for r in graph.runs:
        props = dict(r.properties)
        ns = props.get("openlineage_namespace") or job_namespace or r.orchestrator  # a compaction keeps its own
        name = props.get("openlineage_name") or r.flow
        inputs = [ds(d) for d in r.inputs]
        outputs = [ds(d) for d in r.outputs]
        run_facets: dict[str, RunFacet] = {
            "lakeflow_run": LakeflowRunFacet(
                state=r.state,
                restarts=r.restarts,
                records_in=r.io.records_in,
                records_out=r.io.records_out,
                bytes_in=r.io.bytes_in,
                bytes_out=r.io.bytes_out,
                processingType=r.process_type,
                producer=PRODUCER,
            )
        }
        event = partial(
            run_event,
            run_id=_uuid(r.run_id),
            job_namespace=ns,
            job_name=name,
            inputs=inputs,
            outputs=outputs,
            job_facets={"jobType": job_type(r.process_type, r.orchestrator.upper())},
        )
        if r.start_ms:
            out.append(event("START", event_time=_time(r.start_ms), run_facets=run_facets))
        if r.result and r.end_ms:
            facets = dict(run_facets)
            if r.failure:
                facets["errorMessage"] = error_message(r.failure, "JAVA" if r.orchestrator == "flink" else "python")
            out.append(event(TERMINAL[r.result], event_time=_time(r.end_ms), run_facets=facets))
    return sorted(out, key=lambda e: (e.eventTime, e.run.runId, e.eventType is not RunState.START))


def _uuid(run_id: str) -> str:
    try:
        return str(uuid.UUID(run_id))
    except ValueError:
        return str(uuid.uuid5(uuid.NAMESPACE_URL, run_id))


def _time(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc)


def send(
    events_: Sequence[RunEvent],
    url: str,
    endpoint: str = MARQUEZ_ENDPOINT,
    api_key: Secret | None = None,
    timeout_s: float = 30.0,
    max_retries: int = 3,
) -> int:
    """POST every event to ``url``/``endpoint`` through openlineage-python's ``HttpTransport``
    (5xx / 429 / connection errors retried with backoff, ``Retry-After`` honoured). A redirect is
    an error: the API key goes to the configured origin only. Returns how many were accepted."""
    import requests
    from openlineage.client.transport.http import ApiKeyTokenProvider, HttpConfig, HttpTransport, TokenProvider

    shown = f"{redact_url(url).rstrip('/')}/{endpoint.lstrip('/')}"
    session = requests.Session()
    session.hooks["response"].append(_refuse_redirect)
    retry = {
        "total": max_retries,
        "connect": max_retries,
        "read": max_retries,
        "status": max_retries,
        "backoff_factor": 0.5,
        "status_forcelist": [429, 500, 502, 503, 504],
        "allowed_methods": ["POST"],
        "respect_retry_after_header": True,
        "raise_on_status": False,
    }
    auth = ApiKeyTokenProvider({"api_key": api_key.reveal()}) if api_key else TokenProvider({})
    transport = HttpTransport(
        HttpConfig(
            url=url.rstrip("/") + "/",
            endpoint=endpoint.lstrip("/"),
            timeout=timeout_s,
            auth=auth,
            retry=retry,
            session=session,
        )
    )
    sent = 0
    try:
        for e in events_:
            try:
                transport.emit(e)
            except requests.HTTPError as exc:
                r = exc.response  # raise_for_status attaches it
                answer = f"HTTP {r.status_code}: {r.text[:300]}" if r is not None else "HTTP error"
                raise EmitError(f"OpenLineage POST {shown}: {answer}") from None
            except (requests.RequestException, _Redirected) as exc:
                raise EmitError(
                    f"OpenLineage POST {shown}: {type(exc).__name__}: {redact_url(str(exc))[:300]}"
                ) from None
            sent += 1
    finally:
        transport.close()
    return sent


class _Redirected(LakeflowError, RuntimeError):
    pass


def _refuse_redirect(response, *args, **kwargs):
    if response.is_redirect:
        target = redact_url(response.headers.get("Location", ""))
        raise _Redirected(
            f"redirected to {target}: configure the URL it redirects to (credentials go to the configured origin only)"
        )
    return response
