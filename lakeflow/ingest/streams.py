"""The streams one ingestion job writes: the pipeline's (a topic pattern's from the broker's topics
at start), each with its raw table registered and loaded."""

from __future__ import annotations

from dataclasses import dataclass

from lakeflow.catalog import Catalog, TableHandle
from lakeflow.ingest import IngestError
from lakeflow.ingest.job import TableWrite
from lakeflow.ingest.kafka import KafkaInput, list_topics
from lakeflow.settings import Settings
from lakeflow.streams import Stream, load_pipeline


@dataclass(frozen=True)
class RegisteredTable:
    """A stream's raw table as the job found it: what it writes, its handle (vended credentials)."""

    write: TableWrite
    handle: TableHandle
    created: bool


def ingest_streams(settings: Settings) -> tuple[Stream, ...]:
    """The pipeline's streams for this run: with SOURCE=kafka every stream with its topics (a topic
    pattern's one per matching topic on the broker now); with the synthetic source every stream of
    fixed topics (or none). IngestError when there is nothing to read."""
    pipeline = load_pipeline(settings)
    source = KafkaInput.from_settings(settings)
    if source is None:
        if pipeline.patterns:
            names = ", ".join(repr(d.name) for d in pipeline.patterns)
            raise IngestError(f"stream {names} of {pipeline.source}: a topic pattern needs SOURCE=kafka")
        return pipeline.streams()
    silent = [d.name for d in pipeline.declared if not d.topics and d.pattern is None]
    if silent:
        raise IngestError(f"stream {silent[0]!r} of {pipeline.source}: SOURCE=kafka needs its 'topics'")
    streams = pipeline.streams(list_topics(source) if pipeline.patterns else ())
    if not streams:
        patterns = ", ".join(repr(d.pattern) for d in pipeline.patterns)
        raise IngestError(f"no topic on {source.bootstrap_servers} matches {patterns} ({pipeline.source})")
    return streams


def table_write(catalog: Catalog, stream: Stream) -> RegisteredTable:
    """``stream``'s raw table, registered if need be and loaded with vended credentials."""
    registered = catalog.register(stream.namespace, stream.table)  # idempotent
    handle = catalog.load(stream.namespace, stream.table, vended=True)
    return RegisteredTable(TableWrite.of(stream, handle), handle, registered.created)
