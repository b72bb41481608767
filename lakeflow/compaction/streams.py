"""Which streams the compaction serves: every stream of the pipeline whose raw table exists (a topic
pattern's tables found in the catalog), or the one a command names (``--stream``)."""

from __future__ import annotations

from lakeflow.catalog import open_catalog
from lakeflow.catalog.base import Catalog, TableIdent, TableNotFound
from lakeflow.settings import Settings
from lakeflow.streams import Pipeline, PipelineError, Stream, load_pipeline


def pipeline_streams(settings: Settings, pipeline: Pipeline | None = None) -> tuple[Stream, ...]:
    """The pipeline's streams: its fixed ones, and for a topic pattern one per raw table of its
    template registered in the catalog (the ingestion job registers them as their topics appear)."""
    pipeline = pipeline or load_pipeline(settings)
    if not pipeline.patterns:
        return pipeline.streams()
    with open_catalog(settings) as catalog:
        tables = [t.name for ns in sorted({d.namespace for d in pipeline.patterns}) for t in _listed(catalog, ns)]
    return pipeline.streams_of_tables(tables)


def _listed(catalog: Catalog, namespace: tuple[str, ...]) -> list[TableIdent]:
    try:
        return catalog.list_tables(namespace)
    except TableNotFound:  # no namespace yet: no table of the pattern registered
        return []


def chosen_stream(settings: Settings, name: str | None) -> Stream:
    """The stream called ``name`` (a declared stream, or one table of a pattern stream); with no
    name, the pipeline's only stream (PipelineError naming the choices when it has several)."""
    pipeline = load_pipeline(settings)
    if name is None and len(pipeline.declared) == 1 and not pipeline.patterns:
        return pipeline.streams()[0]
    if name is not None:  # a pattern's table by its name alone: no listing of the catalog a run
        named = [s for s in pipeline.streams() if s.name == name]
        named += [s for d in pipeline.patterns if (s := d.for_table(name)) is not None]
        if len(named) == 1:
            return named[0]
    streams = pipeline_streams(settings, pipeline)
    if name is not None:
        return pipeline.find(name, streams)
    if len(streams) != 1:
        names = ", ".join(s.name for s in streams) or "none registered yet"
        raise PipelineError(f"{pipeline.source} has {len(streams)} streams: name one with --stream ({names})")
    return streams[0]
