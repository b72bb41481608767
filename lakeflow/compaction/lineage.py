"""The compaction's OpenLineage run events (START, then COMPLETE or FAIL) in the lineage store,
built with openlineage-python (:mod:`lakeflow.lineage.openlineage`).

Dataset names come from :mod:`lakeflow.lineage.datasets`, derived exactly as the Flink job
declares its sink (location → canonical name; catalog identity as a symlink alias), so the
harvester joins both engines' lineage into one graph.

Both datasets carry the standard ``schema`` facet: the raw table its declared fields (the records as
JSON carries them) on every event, the Iceberg table its schema as the run left it on the final
event (the table's current schema: after a commit, the evolved one its data files were written with,
which the commit asserts).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from openlineage.client.facet_v2 import processing_engine_run
from pyiceberg.types import IcebergType, ListType, MapType, NestedField, StructType

from lakeflow.compaction.commit import Target, iceberg_catalog_uri
from lakeflow.compaction.config import CompactConfig
from lakeflow.compaction.report import CompactionReport
from lakeflow.compaction.source import RawTable
from lakeflow.lineage import openlineage as ol
from lakeflow.lineage.columns import ELEMENT, KEY, VALUE, Column
from lakeflow.lineage.datasets import DatasetId, catalog_alias, from_location
from lakeflow.schema.types import spelled

JOB_NAMESPACE = "lakeflow"
INTEGRATION = "LAKEFLOW"  # lakeflow's own job and events, whichever engine ran (processing_engine says which)
ENGINE_MODULES = {"arrow": "pyarrow", "spark": "pyspark"}  # engine → the library that ran it


def engine_facet(engine: str) -> processing_engine_run.ProcessingEngineRunFacet | None:
    """The standard ``processing_engine`` run facet of the engine that ran (none before one was chosen,
    nor for a run with nothing new): ``{"name": "arrow" | "spark", "version": its library's}``."""
    if engine not in ENGINE_MODULES:
        return None
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version(ENGINE_MODULES[engine])
    except PackageNotFoundError:
        found = "unknown"
    return processing_engine_run.ProcessingEngineRunFacet(version=found, name=engine, producer=ol.PRODUCER)


def columns(fields: Iterable[NestedField]) -> tuple[Column, ...]:
    """Iceberg fields as lineage columns: types as lakeflow spells them (``long``, ``decimal(9,2)``,
    ``struct<lat: double>``), the docs as descriptions; a struct's fields nested, a list's element and
    a map's key and value as the fields ``_element``, ``key`` and ``value``."""
    return tuple(_column(f.name, f.field_type, f.doc) for f in fields)


def _column(name: str, t: IcebergType, doc: str | None = None) -> Column:
    nested: tuple[Column, ...] = ()
    if isinstance(t, StructType):
        nested = columns(t.fields)
    elif isinstance(t, ListType):
        nested = (_column(ELEMENT, t.element_type),)
    elif isinstance(t, MapType):
        nested = (_column(KEY, t.key_type), _column(VALUE, t.value_type))
    return Column(name, spelled(t), doc or "", nested)


def job_name(config: CompactConfig) -> str:
    return f"compact.{config.target_name}"


def raw_datasets(config: CompactConfig, raw: RawTable) -> tuple[DatasetId, DatasetId]:
    """The raw table's canonical identity and its catalog alias (as the Flink job declares them)."""
    s = config.settings
    catalog_uri = s.lakekeeper if s.catalog == "lakekeeper" else s.home.as_uri()
    ident = raw.handle.ident
    return (
        from_location(raw.handle.location),
        catalog_alias(catalog_uri, ident.warehouse, ".".join(ident.namespace), ident.name),
    )


def target_datasets(config: CompactConfig, raw: RawTable, target: Target) -> tuple[DatasetId, DatasetId]:
    """The Iceberg table's canonical identity (its location) and its Iceberg catalog alias."""
    return (
        from_location(target.location),
        catalog_alias(
            iceberg_catalog_uri(config.settings),
            raw.handle.ident.warehouse,
            ".".join(config.namespace),
            config.target_table,
        ),
    )


class LineageRun:
    """Builds the run's events with openlineage-python and writes them into the lineage store;
    the final event's input/output statistics facets carry the report's figures, its output's schema
    facet the Iceberg table's schema."""

    def __init__(self, config: CompactConfig, raw: RawTable, target: Target, report: CompactionReport) -> None:
        self.config, self.report, self.target = config, report, target
        self.raw, self.raw_alias = raw_datasets(config, raw)
        self.out, self.out_alias = target_datasets(config, raw, target)
        self.declared = columns(config.schema.fields.fields)
        self.transport = ol.StoreTransport(config.settings.lineage_dir)

    def event(self, event_type: str, run_facets: dict[str, Any], final: bool):
        if final:
            r = self.report
            inputs = [
                ol.input_dataset(
                    self.raw, [self.raw_alias], rows=r.rows_in, size=r.bytes_in, files=r.files_in, columns=self.declared
                )
            ]
            outputs = [
                ol.output_dataset(
                    self.out,
                    [self.out_alias],
                    rows=r.rows_out,
                    size=r.bytes_out,
                    files=r.files_out,
                    columns=columns(self.target.table.schema().fields),
                )
            ]
            run_facets = {**run_facets, "lakeflow_compaction": ol.compaction_facet(r.facet())}
        else:
            inputs, outputs = (
                [ol.input_dataset(self.raw, [self.raw_alias], columns=self.declared)],
                [ol.output_dataset(self.out, [self.out_alias])],
            )
        engine = engine_facet(self.report.engine)
        if engine is not None:
            run_facets = {**run_facets, "processing_engine": engine}
        return ol.run_event(
            event_type,
            run_id=self.config.run_id,
            job_namespace=JOB_NAMESPACE,
            job_name=job_name(self.config),
            inputs=inputs,
            outputs=outputs,
            run_facets=run_facets,
            job_facets={"jobType": ol.job_type("BATCH", INTEGRATION)},
        )

    def write(self, event_type: str, run_facets: dict[str, Any] | None = None, final: bool = False) -> None:
        self.transport.emit(self.event(event_type, run_facets or {}, final))


@contextmanager
def lineage_run(config: CompactConfig, raw: RawTable, target: Target, report: CompactionReport) -> Iterator[LineageRun]:
    """START (timed now), then COMPLETE when the block ends or FAIL (with the error) when it raises,
    written when the run ends. A run that found nothing new and committed nothing writes no event: a
    service over idle tables would otherwise add two files a table each period to the store."""
    run = LineageRun(config, raw, target, report)
    start = run.event("START", {}, final=False)
    try:
        yield run
    except BaseException as exc:
        report.fail(exc)
        run.transport.emit(start)
        run.write("FAIL", {"errorMessage": ol.error_message(f"{type(exc).__name__}: {exc}", "python")}, final=True)
        raise
    report.finish()
    if report.files_in or report.snapshot_id is not None:
        run.transport.emit(start)
        run.write("COMPLETE", final=True)
