"""Turning plan references into datasets, by fidelity.

1. What the job declares: lakeflow's global job parameters (``PARAM_*``: table location and its
   Lakekeeper identity; its one input, e.g. a Kafka topic, which then stands for every source
   operator of the plan) and its sink names ``LakeflowSink[<location>]``.
2. SQL plan nodes naming a catalog table (scans, lookup joins, sinks, the Kafka SQL source's
   ``KafkaSource-<catalog>.<db>.<table>``), resolved through ``catalog_platform_map`` (the user's
   word wins), then the SQL Gateway: ``DESCRIBE CATALOG`` (jdbc / iceberg / paimon catalogs), then
   ``SHOW CREATE TABLE`` (the ``connector`` option: Kafka's topic(s) and bootstrap servers, JDBC's
   URL and ``table-name``, a ``filesystem`` table's ``path``). A Sink V2 writer ``<table>[N]:
   Writer`` names its table alone: it is the table of that name when exactly one catalog the
   gateway shows has one (evidence ``unique-table-name``), never when several do.
3. Operator names (``KafkaSource-x``, ``<name>: Writer``): name-only evidence, reported as
   unresolved unless ``trust_operator_names`` is set.

JDBC tables are named as OpenLineage does: ``postgres://host:port`` + ``database.schema.table``
(schema ``public`` unless given), ``mysql://host:port`` + ``database.table``, other URLs by their
scheme; the database is the URL's (a connector table) or the Flink database (a table of Flink's
JDBC catalog, whose ``schema.table`` names are table names of their own).

Whatever cannot be resolved is returned with the reason; connectors that are not datasets
(``datagen``, ``print``, ``blackhole``) are returned as skipped.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from urllib.parse import urlparse

from lakeflow.lineage import datasets as ds
from lakeflow.lineage.config import HarvestConfig
from lakeflow.lineage.datasets import DatasetId
from lakeflow.lineage.flink_rest import FlinkRestError
from lakeflow.lineage.plan import SINK, SOURCE, Reference, TableRef
from lakeflow.lineage.sql_gateway import SqlGatewayClient
from lakeflow.secret import redact_url
from lakeflow.uris import FILE, S3_SPELLINGS

NOT_DATASETS = frozenset({"datagen", "print", "blackhole"})
JDBC_PLATFORMS = {
    "jdbc:postgresql": "postgres",
    "jdbc:mysql": "mysql",
    "jdbc:sqlserver": "mssql",
    "jdbc:oracle": "oracle",
    "jdbc:db2": "db2",
    "jdbc:mariadb": "mariadb",
    "jdbc:redshift": "redshift",
    "jdbc:snowflake": "snowflake",
}
LOCATION_SCHEMES = (FILE, *S3_SPELLINGS, "gs", "hdfs", "abfs", "abfss")
JDBC_DEFAULT_PORTS = {"postgres": 5432, "mysql": 3306, "mariadb": 3306, "mssql": 1433}
JDBC_DEFAULT_SCHEMAS = {"postgres": "public", "redshift": "public", "mssql": "dbo"}
KAFKA_CONNECTORS = ("kafka", "upsert-kafka")
DECLARED, PLAN, NAME_ONLY, UNIQUE_NAME = "declared", "plan", "name-only", "unique-table-name"


@dataclass(frozen=True, order=True)
class Resolution:
    """What one reference turned out to be: a dataset, skipped (not a dataset) or unresolved."""

    reference: Reference
    dataset: DatasetId | None = None
    aliases: tuple[DatasetId, ...] = ()
    platform_instance: str | None = None
    evidence: str = PLAN
    skipped: str | None = None
    unresolved: str | None = None


class Resolver:
    def __init__(self, config: HarvestConfig, gateway: SqlGatewayClient | None = None) -> None:
        self.config = config
        self.gateway = gateway

    def resolve(
        self, refs: list[Reference], user_config: Mapping[str, str], settled: Callable[[Reference], bool] | None = None
    ) -> list[Resolution]:
        """Resolutions for a job's references, declared parameters first. A reference ``settled``
        (to a table lakeflow's listener settled: :func:`lakeflow.lineage.native.settled`) is not
        looked up: its resolution is a stand-in the listener's replaces."""
        out: list[Resolution] = []
        declared = declared_output(user_config)
        if declared is not None:
            dataset, aliases = declared
            sink = next((r for r in refs if r.kind == "declared" and _same(r.value, dataset)), None)
            ref = sink or Reference(SINK, "declared", "", "global job parameters", value=user_config[ds.PARAM_LOCATION])
            out.append(self.with_instance(Resolution(ref, dataset, aliases, evidence=DECLARED)))
            refs = [r for r in refs if r is not sink]
        inputs = declared_inputs(user_config)
        if inputs:
            sources = [r for r in refs if r.role == SOURCE]
            for i, source in enumerate(inputs):
                ref = (
                    sources[0]
                    if sources and i == 0
                    else Reference(SOURCE, "declared", "", "global job parameters", value=str(source))
                )
                out.append(self.with_instance(Resolution(ref, source, evidence=DECLARED)))
            refs = [r for r in refs if r.role != SOURCE]
        for ref in refs:
            if settled is not None and settled(ref):
                out.append(Resolution(ref, unresolved=f"{ref.role} '{ref.operator}': left to lakeflow's listener"))
            else:
                out.extend(self.with_instance(r) for r in self._one(ref))
        return sorted(out)

    def with_instance(self, r: Resolution) -> Resolution:
        """``r`` with the platform instance ``platform_instance_map`` gives its dataset's platform."""
        if r.dataset is None or r.platform_instance:
            return r
        instance = self.config.platform_instance_map.get(r.dataset.platform)
        return replace(r, platform_instance=instance) if instance else r

    def _one(self, ref: Reference) -> list[Resolution]:
        if ref.kind == "declared":
            return [Resolution(ref, ds.from_location(ref.value or ""), evidence=DECLARED)]
        if ref.kind == "table" and ref.table is not None:
            return self.table(ref, ref.table)
        if ref.kind == "table-writer" and ref.table is not None:
            return self._table_writer(ref, ref.table.table)
        if ref.kind == "filesystem":
            return [
                Resolution(
                    ref,
                    unresolved=f"filesystem table sink ({ref.operator}): the plan names neither the table nor its path",
                )
            ]
        if ref.kind == "kafka":
            return self._kafka_operator(ref)
        if ref.kind == "writer":
            loc = ref.value or ""
            if self.config.trust_operator_names and urlparse(loc).scheme in LOCATION_SCHEMES:
                return [Resolution(ref, ds.from_location(loc), evidence=NAME_ONLY)]
            return [
                Resolution(
                    ref,
                    evidence=NAME_ONLY,
                    unresolved=(f"name-only: sink '{loc}' (Writer/Committer) does not say what it writes"),
                )
            ]
        return [
            Resolution(
                ref,
                evidence=NAME_ONLY,
                unresolved=(f"{ref.role} '{ref.value or ref.operator}': no connector evidence in the plan"),
            )
        ]

    def _kafka_operator(self, ref: Reference) -> list[Resolution]:
        """``KafkaSource-<name>``: the Kafka SQL source of catalog table ``<name>`` when the gateway
        shows a Kafka table by that identifier; otherwise only a name."""
        name_only = (
            f"name-only: operator '{ref.operator}' is named like a Kafka {ref.role} of topic "
            f"'{ref.value}', but nothing else shows a Kafka connector"
        )
        if ref.table is not None and self.gateway is not None:
            try:
                options = self.gateway.table_options(ref.table)
            except FlinkRestError as exc:
                name_only += f" (no catalog table {ref.table}: {exc})"
            else:
                if options.get("connector") in KAFKA_CONNECTORS:
                    return self._kafka(ref, ref.table, options, None)
                name_only += f" (catalog table {ref.table} has connector '{options.get('connector', '')}')"
        if self.config.trust_operator_names:
            return [Resolution(ref, DatasetId("kafka", ref.value or ""), evidence=NAME_ONLY)]
        return [Resolution(ref, evidence=NAME_ONLY, unresolved=name_only)]

    def _table_writer(self, ref: Reference, name: str) -> list[Resolution]:
        """A Sink V2 writer ``<name>[N]: Writer``: the one table called ``name`` in the catalogs the
        gateway shows, or unresolved (no gateway, no such table, several)."""
        what = f"table sink '{name}': the plan names no catalog or database (Sink V2 writer)"
        if self.gateway is None:
            return [Resolution(ref, unresolved=what)]
        try:
            found = [t for t in self.gateway.tables() if t.table == name]
        except FlinkRestError as exc:
            return [Resolution(ref, unresolved=f"{what}; listing the gateway's catalogs failed: {exc}")]
        if not found:
            return [
                Resolution(
                    ref,
                    unresolved=f"{what}, and no catalog the gateway shows has a table of that name "
                    "(a session or job-local table?)",
                )
            ]
        if len(found) > 1:
            names = ", ".join(str(t) for t in found)
            return [Resolution(ref, unresolved=f"{what}, and {len(found)} catalog tables have that name: {names}")]
        return [replace(r, evidence=UNIQUE_NAME) if r.dataset else r for r in self.table(ref, found[0])]

    def table(self, ref: Reference, t: TableRef) -> list[Resolution]:
        """What catalog table ``t`` is: by ``catalog_platform_map``, else the SQL Gateway; or why not."""
        mapped = self.config.catalog_platform_map.get(t.catalog or "")
        instance = mapped.platform_instance if mapped else None
        if mapped and mapped.platform:
            return [Resolution(ref, DatasetId(mapped.platform, f"{t.database}.{t.table}"), platform_instance=instance)]
        if self.gateway is None:
            return [
                Resolution(
                    ref,
                    unresolved=f"catalog table {t}: platform unknown (give --sql-gateway-url or a "
                    "catalog_platform_map entry)",
                )
            ]
        try:
            info = self._catalog(t.catalog or "")
            kind = info.get("type", "")
            if kind == "jdbc":
                return [self._jdbc(ref, t, info.get("option:base-url", ""), t.database or "", t.table, instance)]
            if kind in ("iceberg", "paimon"):
                return [
                    Resolution(
                        ref,
                        DatasetId(kind, f"{t.database}.{t.table}"),
                        aliases=_catalog_aliases(info, t),
                        platform_instance=instance,
                    )
                ]
            options = self.gateway.table_options(t)
        except FlinkRestError as exc:
            return [Resolution(ref, unresolved=f"catalog table {t}: SQL Gateway lookup failed: {exc}")]
        return self._from_options(ref, t, options, info.get("type", ""), instance)

    def connector(self, t: TableRef) -> str:
        """Catalog table ``t``'s ``connector`` option as the SQL Gateway shows it; "" when it cannot tell."""
        if self.gateway is None:
            return ""
        try:
            return self.gateway.table_options(t).get("connector", "")
        except FlinkRestError:
            return ""

    def _catalog(self, catalog: str) -> dict[str, str]:
        """DESCRIBE CATALOG, or {} when the gateway cannot describe it (Flink < 1.20, default_catalog)."""
        assert self.gateway is not None
        try:
            return self.gateway.catalog_info(catalog)
        except FlinkRestError:
            return {}

    def _jdbc(
        self, ref: Reference, t: TableRef, url: str, database: str, table: str, instance: str | None
    ) -> Resolution:
        """A JDBC table as OpenLineage names it: ``<platform>://host:port`` and
        ``database[.schema].table``; ``database`` is the URL's when it names one."""
        platform = next((p for prefix, p in JDBC_PLATFORMS.items() if url.startswith(prefix)), None)
        if platform is None:
            return Resolution(ref, unresolved=f"catalog table {t}: unknown JDBC URL {redact_url(url)!r}")
        address, _, properties = url[len("jdbc:") :].partition(";")  # SQL Server: ;databaseName=…
        parsed = urlparse(address)
        try:
            port = parsed.port or JDBC_DEFAULT_PORTS.get(platform)
        except ValueError:
            port = None
        host = f"{parsed.hostname}:{port}" if parsed.hostname and port else parsed.hostname or ""
        namespace = f"{platform}://{host}" if host else platform
        named = dict(p.partition("=")[::2] for p in properties.split(";") if "=" in p)
        path = parsed.path.strip("/") if parsed.netloc else ""  # an address that is no URL (Oracle's thin): none
        database = path or named.get("databaseName") or named.get("database") or database
        schema = JDBC_DEFAULT_SCHEMAS.get(platform)
        if schema and "." not in table:
            table = f"{schema}.{table}"
        name = f"{database}.{table}" if database else table
        return Resolution(ref, DatasetId(namespace, name), platform_instance=instance)

    def _from_options(
        self, ref: Reference, t: TableRef, options: Mapping[str, str], catalog_type: str, instance: str | None
    ) -> list[Resolution]:
        connector = options.get("connector", "")
        if connector in NOT_DATASETS:
            return [Resolution(ref, skipped=f"{t}: connector '{connector}' is not a dataset")]
        if connector == "filesystem":
            if not options.get("path"):
                return [Resolution(ref, unresolved=f"catalog table {t}: filesystem table without a path")]
            return [
                Resolution(
                    ref,
                    ds.from_location(options["path"]),
                    aliases=(DatasetId("flink-catalog", str(t)),),
                    platform_instance=instance,
                )
            ]
        if connector in KAFKA_CONNECTORS:
            return self._kafka(ref, t, options, instance)
        if connector == "jdbc":
            table_name = options.get("table-name") or t.table
            return [self._jdbc(ref, t, options.get("url", ""), "", table_name, instance)]
        if not connector:
            if catalog_type == "hive":
                return [Resolution(ref, DatasetId("hive", f"{t.database}.{t.table}"), platform_instance=instance)]
            return [Resolution(ref, unresolved=f"catalog table {t}: its DDL names no connector")]
        return [Resolution(ref, DatasetId(connector, f"{t.database}.{t.table}"), platform_instance=instance)]

    def _kafka(self, ref: Reference, t: TableRef, options: Mapping[str, str], instance: str | None) -> list[Resolution]:
        """A Kafka table's topics (``topic``: one, or a ``;`` list) on its first bootstrap server,
        in OpenLineage's ``kafka://host:port`` namespace; a ``topic-pattern`` names no topic."""
        topics = [name.strip() for name in options.get("topic", "").split(";") if name.strip()]
        if not topics:
            pattern = options.get("topic-pattern")
            why = f"its topic-pattern '{pattern}' names no topic" if pattern else "it names no topic"
            return [Resolution(ref, unresolved=f"catalog table {t}: Kafka table, but {why}")]
        servers = options.get("properties.bootstrap.servers", "").split(",")[0].strip()
        namespace = f"kafka://{servers}" if servers else "kafka"
        return [Resolution(ref, DatasetId(namespace, topic), platform_instance=instance) for topic in topics]


def declared_output(user_config: Mapping[str, str]) -> tuple[DatasetId, tuple[DatasetId, ...]] | None:
    """The table a lakeflow job declares in its global job parameters: its location's dataset and
    its catalog identity as an alias; None when the job declares nothing."""
    location = user_config.get(ds.PARAM_LOCATION)
    if not location:
        return None
    aliases: tuple[DatasetId, ...] = ()
    parts = [user_config.get(k) for k in (ds.PARAM_CATALOG_URI, ds.PARAM_WAREHOUSE, ds.PARAM_NAMESPACE, ds.PARAM_TABLE)]
    if all(parts):
        aliases = (ds.catalog_alias(*parts),)  # type: ignore[arg-type]
    return ds.from_location(location), aliases


def declared_inputs(user_config: Mapping[str, str]) -> list[DatasetId]:
    """The inputs a lakeflow job declares (``PARAM_SOURCE_*``: e.g. its Kafka topics, ``,``-separated)."""
    namespace, names = user_config.get(ds.PARAM_SOURCE_NAMESPACE), user_config.get(ds.PARAM_SOURCE_NAME)
    return [DatasetId(namespace, name) for name in names.split(",") if name] if namespace and names else []


def _same(location: str | None, dataset: DatasetId) -> bool:
    return location is not None and ds.from_location(location) == dataset


def _catalog_aliases(info: Mapping[str, str], t: TableRef) -> tuple[DatasetId, ...]:
    """An Iceberg REST catalog table's catalog identity (joins Lakekeeper's alias of the same table)."""
    uri, warehouse = info.get("option:uri", ""), info.get("option:warehouse", "")
    return (ds.catalog_alias(uri, warehouse, t.database or "", t.table),) if uri and warehouse else ()
