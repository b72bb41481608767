"""Canonical dataset identities, shared by every engine: derive every name and URN here.

A dataset's canonical identity is its physical location in OpenLineage's naming
(``s3://bucket`` + key, ``file`` + absolute path). A catalog identity (Lakekeeper warehouse,
namespace, table) travels beside it as an alias (OpenLineage ``symlinks`` facet), so the Flink
sink, the compaction's run event and the harvester's resolution of a path all name one dataset.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlparse

from lakeflow.secret import strip_credentials
from lakeflow.uris import canonical_scheme

# What lakeflow's own jobs declare (Flink global job parameters / Spark run events).
PARAM_PREFIX = "lakeflow."
PARAM_CATALOG = "lakeflow.catalog"  # "lakekeeper" or "local"
PARAM_CATALOG_URI = "lakeflow.catalog.uri"  # e.g. http://localhost:8181 or file:///…/.lakeflow
PARAM_WAREHOUSE = "lakeflow.warehouse"  # warehouse id (or "local")
PARAM_NAMESPACE = "lakeflow.table.namespace"  # dot-joined levels
PARAM_TABLE = "lakeflow.table.name"
PARAM_LOCATION = "lakeflow.table.location"
PARAM_FORMAT = "lakeflow.table.format"  # "dataset"
PARAM_RUN_ID = "lakeflow.run.id"  # the ingest job's run_id, as in every reading it writes
PARAM_SOURCE_NAMESPACE = "lakeflow.source.namespace"  # the job's inputs, e.g. kafka://host:port …
PARAM_SOURCE_NAME = "lakeflow.source.name"  # … and its topics, ","-separated
SINK_NAME_PREFIX = "LakeflowSink"  # sink operator name: "LakeflowSink[<location>]"


@dataclass(frozen=True, order=True)
class DatasetId:
    """A dataset in OpenLineage naming: ``namespace`` (``s3://bucket``, ``file``, ``kafka://host``)
    and ``name`` (key or path, topic, ``db.table``)."""

    namespace: str
    name: str

    def __post_init__(self) -> None:
        # The one place names are made fit to publish: no URL credentials (user:pass@, password=…).
        object.__setattr__(self, "namespace", strip_credentials(self.namespace))
        object.__setattr__(self, "name", strip_credentials(self.name))

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name.lstrip('/')}" if self.namespace != "file" else f"file://{self.name}"

    @property
    def platform(self) -> str:
        """The DataHub platform of the dataset (``s3``, ``file``, ``kafka``, ``iceberg``, …)."""
        return self.namespace.split("://", 1)[0]

    def datahub_urn(self, env: str = "PROD", platform_instance: str | None = None) -> str:
        """``urn:li:dataset:(urn:li:dataPlatform:<platform>,<name>,<env>)``."""
        if "://" in self.namespace and self.platform in ("s3", "gs", "abfss", "hdfs"):
            name = f"{self.namespace.split('://', 1)[1]}/{self.name.lstrip('/')}"
        else:
            name = self.name
        if platform_instance:
            name = f"{platform_instance}.{name}"
        return f"urn:li:dataset:(urn:li:dataPlatform:{self.platform},{name},{env})"


def from_location(location: str) -> DatasetId:
    """The canonical identity of the dataset stored at ``location`` (a URI or a local path)."""
    parsed = urlparse(location)
    scheme = canonical_scheme(parsed.scheme)
    path = parsed.path.rstrip("/") or "/"
    if scheme in ("", "file"):
        return DatasetId("file", path if scheme else _abs(location))
    if scheme in ("s3", "gs", "hdfs") or scheme.startswith("abfs"):
        return DatasetId(f"{scheme}://{parsed.netloc}", path.lstrip("/"))
    return DatasetId(f"{scheme}://{parsed.netloc}", path)


def catalog_alias(catalog_uri: str, warehouse: str, namespace: str, table: str) -> DatasetId:
    """The catalog identity of a table (an alias of its location): ``<catalog-uri>/<warehouse>``
    + ``<namespace>.<table>``."""
    return DatasetId(f"{catalog_uri.rstrip('/')}/{warehouse}", f"{namespace}.{table}")


def _abs(path: str) -> str:
    from pathlib import Path

    return str(Path(path).expanduser().resolve()).rstrip("/") or "/"
