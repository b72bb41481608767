"""OpenLineage run events, built with openlineage-python's model (events, datasets, facets) and
written or sent through its transports.

* The compaction writes its events into the lineage store through :class:`StoreTransport` (an
  openlineage-python ``Transport``: one file per event, atomic; see :mod:`lakeflow.lineage.store`).
* ``lakeflow harvest --format openlineage`` writes JSON Lines through the library's
  ``FileTransport``; ``--openlineage-url`` posts each event through its ``HttpTransport`` (Marquez
  ``/api/v1/lineage``, DataHub ``/openapi/openlineage/api/v1/lineage``).

Events go to the transports directly, not through ``OpenLineageClient``: the client adds facets
from its environment (``OPENLINEAGE__*`` variables, tags, git location), so what is sent would
differ from what is written, and identical harvests would no longer give identical events.

Datasets with known columns carry the standard ``schema`` facet (:func:`schema`). lakeflow's own
facets (``lakeflow_run``, ``lakeflow_compaction``) are custom facets whose
``_schemaURL`` names their JSON schema in ``docs/openlineage/``. Importing openlineage-python takes
~0.5 s: only the commands that write or send events import this module.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, cast

import attr
from openlineage.client.event_v2 import Dataset, InputDataset, Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.facet_v2 import (
    InputDatasetFacet,
    OutputDatasetFacet,
    RunFacet,
    error_message_run,
    input_statistics_input_dataset,
    job_type_job,
    output_statistics_output_dataset,
    schema_dataset,
    symlinks_dataset,
)
from openlineage.client.serde import Serde
from openlineage.client.transport.file import FileConfig, FileTransport
from openlineage.client.transport.transport import Transport

from lakeflow import __version__
from lakeflow.lineage import store
from lakeflow.lineage.columns import Column
from lakeflow.lineage.datasets import DatasetId
from lakeflow.lineage.store import read_events  # noqa: F401  (the store's reader, re-exported)

PRODUCER = f"https://github.com/lakeflow/lakeflow/tree/v{__version__}"
FACETS_URL = f"{PRODUCER}/docs/openlineage"  # where lakeflow's custom facet schemas live
EVENT_TYPES = tuple(s.value for s in RunState)

DatasetLike = Dataset | InputDataset | OutputDataset


@attr.define
class LakeflowRunFacet(RunFacet):
    """A harvested run as lakeflow saw it: engine state, restarts and I/O counters."""

    state: str
    restarts: int
    records_in: int
    records_out: int
    bytes_in: int
    bytes_out: int
    processingType: str  # noqa: N815

    @staticmethod
    def _get_schema() -> str:
        return f"{FACETS_URL}/LakeflowRunFacet.json#/$defs/LakeflowRunFacet"


@attr.define
class LakeflowCompactionRunFacet(RunFacet):
    """The compaction report's figures (files, rows, bytes, quarantine, snapshot); the fields are
    added from the report with ``with_additional_properties``."""

    @staticmethod
    def _get_schema() -> str:
        return f"{FACETS_URL}/LakeflowCompactionRunFacet.json#/$defs/LakeflowCompactionRunFacet"


def symlinks(aliases: Sequence[DatasetId]) -> symlinks_dataset.SymlinksDatasetFacet:
    """Other names of a dataset (e.g. its Lakekeeper identity) as OpenLineage's symlinks facet."""
    return symlinks_dataset.SymlinksDatasetFacet(
        identifiers=[symlinks_dataset.Identifier(namespace=a.namespace, name=a.name, type="TABLE") for a in aliases],
        producer=PRODUCER,
    )


def schema(columns: Sequence[Column]) -> schema_dataset.SchemaDatasetFacet:
    """The standard ``schema`` dataset facet of ``columns`` (their nested fields as
    :mod:`lakeflow.lineage.columns` describes them)."""
    return schema_dataset.SchemaDatasetFacet(fields=[_field(c) for c in columns], producer=PRODUCER)


def _field(c: Column) -> schema_dataset.SchemaDatasetFacetFields:
    return schema_dataset.SchemaDatasetFacetFields(
        name=c.name,
        type=c.type or None,
        description=c.description or None,
        fields=[_field(f) for f in c.fields] or None,
    )


def dataset(ds: DatasetId, facets: Mapping[str, Any] | None = None, aliases: Sequence[DatasetId] = ()) -> Dataset:
    """A dataset; ``aliases`` (e.g. the Lakekeeper identity) go into the symlinks facet."""
    all_facets = dict(facets or {})
    if aliases:
        all_facets["symlinks"] = symlinks(aliases)
    return Dataset(namespace=ds.namespace, name=ds.name, facets=all_facets)


def input_dataset(
    ds: DatasetId,
    aliases: Sequence[DatasetId] = (),
    rows: int | None = None,
    size: int | None = None,
    files: int | None = None,
    columns: Sequence[Column] = (),
) -> InputDataset:
    """An input dataset, with the input statistics facet when figures are given and the schema facet
    when ``columns`` are."""
    base = dataset(ds, {"schema": schema(columns)} if columns else None, aliases)
    facets: dict[str, InputDatasetFacet] = {}
    if (rows, size, files) != (None, None, None):
        facets["inputStatistics"] = input_statistics_input_dataset.InputStatisticsInputDatasetFacet(
            rowCount=rows, size=size, fileCount=files, producer=PRODUCER
        )
    return InputDataset(namespace=base.namespace, name=base.name, facets=base.facets, inputFacets=facets)


def output_dataset(
    ds: DatasetId,
    aliases: Sequence[DatasetId] = (),
    rows: int | None = None,
    size: int | None = None,
    files: int | None = None,
    columns: Sequence[Column] = (),
) -> OutputDataset:
    """An output dataset, with the output statistics facet when figures are given and the schema facet
    when ``columns`` are."""
    base = dataset(ds, {"schema": schema(columns)} if columns else None, aliases)
    facets: dict[str, OutputDatasetFacet] = {}
    if (rows, size, files) != (None, None, None):
        facets["outputStatistics"] = output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(
            rowCount=rows, size=size, fileCount=files, producer=PRODUCER
        )
    return OutputDataset(namespace=base.namespace, name=base.name, facets=base.facets, outputFacets=facets)


def error_message(message: str, language: str) -> error_message_run.ErrorMessageRunFacet:
    return error_message_run.ErrorMessageRunFacet(message=message, programmingLanguage=language, producer=PRODUCER)


def job_type(processing_type: str, integration: str) -> job_type_job.JobTypeJobFacet:
    return job_type_job.JobTypeJobFacet(
        processingType=processing_type, integration=integration, jobType="JOB", producer=PRODUCER
    )


def compaction_facet(figures: Mapping[str, Any]) -> RunFacet:
    # with_additional_properties returns an instance of a subclass of the facet's class, though
    # openlineage-python annotates it as BaseFacet
    return cast(RunFacet, LakeflowCompactionRunFacet(producer=PRODUCER).with_additional_properties(**figures))


def run_event(
    event_type: str,
    *,
    run_id: str,
    job_namespace: str,
    job_name: str,
    event_time: datetime | None = None,
    inputs: Sequence[DatasetLike] = (),
    outputs: Sequence[DatasetLike] = (),
    run_facets: Mapping[str, RunFacet] | None = None,
    job_facets: Mapping[str, Any] | None = None,
) -> RunEvent:
    """A RunEvent; plain datasets given as inputs/outputs become Input/OutputDatasets."""
    if event_type not in EVENT_TYPES:
        raise ValueError(f"event type {event_type!r}: expected one of {', '.join(EVENT_TYPES)}")
    when = (event_time or datetime.now(timezone.utc)).astimezone(timezone.utc)
    return RunEvent(
        eventType=RunState(event_type),
        eventTime=when.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        run=Run(runId=run_id, facets=dict(run_facets or {})),
        job=Job(namespace=job_namespace, name=job_name, facets=dict(job_facets or {})),
        inputs=[
            d if isinstance(d, InputDataset) else InputDataset(namespace=d.namespace, name=d.name, facets=d.facets)
            for d in inputs
        ],
        outputs=[
            d if isinstance(d, OutputDataset) else OutputDataset(namespace=d.namespace, name=d.name, facets=d.facets)
            for d in outputs
        ],
        producer=PRODUCER,
    )


def to_dict(event: RunEvent) -> dict[str, Any]:
    """The event's JSON document, as the library serializes it (nulls dropped, enums as values)."""
    return Serde.to_dict(event)


def to_json(event: RunEvent) -> str:
    """One line of JSON, exactly as the library's transports write and send it."""
    return Serde.to_json(event)


class StoreTransport(Transport):
    """An openlineage-python transport into lakeflow's lineage store (one file per event, atomic)."""

    kind = "lakeflow_store"

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def emit(self, event: RunEvent) -> Path:  # type: ignore[override]
        return store.write(self.directory, to_dict(event))


def write_event(directory: Path, event: RunEvent) -> Path:
    """Write one event into the lineage store; returns its path."""
    return StoreTransport(directory).emit(event)


def write_jsonl(events: Iterable[RunEvent], path: Path) -> None:
    """The events as JSON Lines through the library's ``FileTransport`` (append mode), into a
    temporary file renamed over ``path`` once complete."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.unlink(missing_ok=True)
    tmp.touch()  # an empty file even when there are no events
    try:
        transport = FileTransport(FileConfig(log_file_path=str(tmp), append=True))
        for e in events:
            transport.emit(e)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def dumps(events: Iterable[RunEvent]) -> str:
    """The events as JSON Lines (what :func:`write_jsonl` writes)."""
    return "".join(to_json(e) + "\n" for e in events)


def loads(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]
