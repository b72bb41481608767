"""One submission of the ingestion job (:class:`IngestJob`), planned from the settings and the tables
it writes (:class:`TableWrite`, one per stream), and the Flink configuration and job parameters it runs with."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from lakeflow.catalog.base import TableHandle, TableIdent
from lakeflow.ingest.kafka import KafkaInput, dead_letter_location
from lakeflow.ingest.storage import table_filesystem_uri
from lakeflow.lineage import datasets
from lakeflow.schema import TableSchema
from lakeflow.settings import Settings
from lakeflow.streams import Stream

FOREVER = 2**63 - 1  # SensorRecords count for NUM_RECORDS=-1 (Long.MAX_VALUE)
# Restarts: exponential delay (1 s doubling up to 10 s). A job runs for weeks, so a TaskManager lost
# now and then must not use up a budget: after RESTART_RESET of stable running the count starts
# over. A crash loop fails the job after RESTART_ATTEMPTS restarts. Failures of one incident (a lost
# TaskManager fails every region it ran) count as one restart.
RESTART_ATTEMPTS = 20
RESTART_RESET = "10 min"
PARAM_SCHEMA_TITLE = f"{datasets.PARAM_PREFIX}schema.title"  # the declared schema's title …
PARAM_SCHEMA_DIGEST = f"{datasets.PARAM_PREFIX}schema.digest"  # … and the digest of its declaration


@dataclass(frozen=True)
class TableWrite:
    """One table the job writes: its stream (topics, declared schema) and the registered raw table."""

    stream: Stream
    ident: TableIdent
    location: str
    vended: bool = False  # the catalog vends its storage credentials: written through its own filesystem

    @classmethod
    def of(cls, stream: Stream, handle: TableHandle) -> TableWrite:
        """``stream`` into its loaded raw table ``handle``."""
        return cls(stream, handle.ident, handle.location.rstrip("/"), handle.storage.has_keys)

    @property
    def schema(self) -> TableSchema:
        return self.stream.schema

    @property
    def sink_location(self) -> str:
        """Where the sink writes: a table with vended credentials on S3 through its own filesystem,
        ``lakeflow-s3://<namespace>.<table>@<bucket>/<key>`` (:mod:`lakeflow.ingest.storage`), else the location."""
        if not self.vended:
            return self.location
        return table_filesystem_uri(self.location, self.ident.namespace, self.ident.name)

    @property
    def sink_name(self) -> str:
        """The sink operator's name, which the lineage harvester resolves: ``LakeflowSink[<location>]``."""
        return f"{datasets.SINK_NAME_PREFIX}[{self.location}]"

    @property
    def dead_letters(self) -> str:
        """Where its dead letters go."""
        return dead_letter_location(self.location)

    def parameters(self, catalog: str, catalog_uri: str) -> dict[str, str]:
        """The table's identity and declared schema, as the lineage reads them."""
        return {
            datasets.PARAM_CATALOG: catalog,
            datasets.PARAM_CATALOG_URI: catalog_uri,
            datasets.PARAM_WAREHOUSE: self.ident.warehouse,
            datasets.PARAM_NAMESPACE: ".".join(self.ident.namespace),
            datasets.PARAM_TABLE: self.ident.name,
            datasets.PARAM_LOCATION: self.location,
            datasets.PARAM_FORMAT: "dataset",
            PARAM_SCHEMA_TITLE: self.schema.title,
            PARAM_SCHEMA_DIGEST: self.schema.digest,
        }


@dataclass(frozen=True)
class IngestJob:
    """What one run writes where: the tables (one per stream) and its source — the synthetic sensors
    and their pacing, or the streams' Kafka topics (``kafka``)."""

    tables: tuple[TableWrite, ...]
    catalog: str  # "lakekeeper" or "local"
    catalog_uri: str
    run_id: str  # one per submission; a constant in the job graph, so recovery keeps it
    num_sensors: int
    num_records: int  # -1: forever
    batch_size: int
    batch_interval_ms: int
    home: Path
    parallelism: int | None = None  # None: Flink's default (cores locally, -p on flink run)
    throttled: bool = True  # False: as fast as possible (the benchmark)
    kafka: KafkaInput | None = None  # SOURCE=kafka: read the streams' topics instead of the sensors

    @classmethod
    def plan(
        cls,
        settings: Settings,
        tables: Sequence[TableWrite],
        *,
        parallelism: int | None = None,
        throttled: bool = True,
    ) -> IngestJob:
        """The job writing ``tables`` with the settings' source (sensors and pacing, or Kafka); a new run id."""
        catalog_uri = settings.lakekeeper if settings.catalog == "lakekeeper" else settings.home.as_uri()
        return cls(
            tables=tuple(tables),
            catalog=settings.catalog,
            catalog_uri=catalog_uri,
            run_id=str(uuid.uuid4()),
            num_sensors=settings.num_sensors,
            num_records=settings.num_records,
            batch_size=settings.batch_size,
            batch_interval_ms=settings.batch_interval_ms,
            home=settings.home,
            parallelism=parallelism,
            throttled=throttled,
            kafka=KafkaInput.from_settings(settings),
        )

    @property
    def topics(self) -> tuple[str, ...]:
        """Every topic the job reads, each once."""
        return tuple(dict.fromkeys(t for table in self.tables for t in table.stream.topics))

    @property
    def bounded(self) -> bool:
        """Ends by itself: NUM_RECORDS records, or the topics up to their offsets at start (KAFKA_STOP_AT)."""
        return self.kafka.stop_at_latest if self.kafka else self.num_records > 0

    @property
    def count(self) -> int:
        """Readings the synthetic source emits per table (``FOREVER`` for NUM_RECORDS=-1)."""
        return self.num_records if self.num_records > 0 else FOREVER

    @property
    def rows_per_second(self) -> float:
        """BATCH_SIZE readings per BATCH_INTERVAL_MS over all source readers; 0 = unthrottled."""
        return self.batch_size * 1000.0 / self.batch_interval_ms if self.throttled else 0.0

    @property
    def name(self) -> str:
        shown = str(self.tables[0].ident) if len(self.tables) == 1 else f"{len(self.tables)} tables"
        return f"lakeflow-ingest {shown}"

    @property
    def checkpoint_dir(self) -> Path:
        return self.home / "checkpoints"

    @property
    def savepoint_dir(self) -> Path:
        """Where a run restarting with a new topic's table stops with its savepoint."""
        return (self.home / "savepoints").resolve()

    def job_parameters(self) -> dict[str, str]:
        """Global job parameters (GET /jobs/{id}/config → user-config): the run id, the topics of a
        Kafka-fed run, and of a job of one table that table and its declared schema (title, digest); a
        job of several tables names each in its sinks (their names and native lineage)."""
        params = {
            datasets.PARAM_CATALOG: self.catalog,
            datasets.PARAM_CATALOG_URI: self.catalog_uri,
            datasets.PARAM_RUN_ID: self.run_id,
        }
        if len(self.tables) == 1:
            params.update(self.tables[0].parameters(self.catalog, self.catalog_uri))
        if self.kafka:
            params[datasets.PARAM_SOURCE_NAMESPACE] = self.kafka.namespace
            params[datasets.PARAM_SOURCE_NAME] = ",".join(self.topics)
        return params

    def flink_configuration(self, *, local: bool) -> dict[str, str]:
        """Job configuration: exactly-once checkpoints every BATCH_INTERVAL_MS into filesystem
        storage under LAKEFLOW_HOME, restarts with exponential delay, the venv's Python. ``local``
        (an in-process MiniCluster) also keeps its REST endpoint on localhost, on a free port.
        Storage credentials are not in here: see :mod:`lakeflow.ingest.storage`."""
        conf = {
            "pipeline.name": self.name,
            "execution.runtime-mode": "STREAMING",
            "execution.checkpointing.interval": f"{self.batch_interval_ms} ms",
            "execution.checkpointing.mode": "EXACTLY_ONCE",
            "execution.checkpointing.storage": "filesystem",
            "execution.checkpointing.dir": self.checkpoint_dir.as_uri(),
            "restart-strategy.type": "exponential-delay",
            "restart-strategy.exponential-delay.initial-backoff": "1 s",
            "restart-strategy.exponential-delay.max-backoff": "10 s",
            "restart-strategy.exponential-delay.backoff-multiplier": "2.0",
            "restart-strategy.exponential-delay.reset-backoff-threshold": RESTART_RESET,
            "restart-strategy.exponential-delay.attempts-before-reset-backoff": str(RESTART_ATTEMPTS),
            "python.executable": sys.executable,
            "python.client.executable": sys.executable,
        }
        if self.parallelism:
            conf["parallelism.default"] = str(self.parallelism)
        if local:
            conf.update({"rest.address": "localhost", "rest.bind-address": "localhost", "rest.port": "0"})
        return conf
