"""Where the part files go: the filesystem a location needs, and how the JVM whose TaskManager
writes the files gets each table's S3A settings and credentials.

A credential belongs to a table, never to a process: on S3 each table is written through a filesystem
of its own, the ``lakeflow-s3`` scheme (``lakeflow.flink.fs``, java/; installed beside Flink's
``flink-s3-fs-hadoop`` in its plugin folder): ``lakeflow-s3://<namespace>.<table>@<bucket>/<key>``.
Flink caches a filesystem per scheme and authority, so each table gets its own instance, which vends
that table's credentials (``lakeflow credential-process``, :data:`CREDENTIAL_COMMAND`) and re-vends
them halfway to expiry. The process's configuration carries only keyless ``fs.s3a.*`` settings
(endpoint, path style) and that command: an in-process MiniCluster (``make run``) gets them through
:func:`configure_filesystems`, a standalone cluster (``lakeflow flink up``) in its ``config.yaml``. No
key goes into a configuration file, the job configuration, a command line or a log.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from lakeflow.ingest import IngestError
from lakeflow.runtime.homes import flink_plugins_dir
from lakeflow.settings.process import process_environment
from lakeflow.uris import S3_SCHEMES

if TYPE_CHECKING:
    from lakeflow.catalog.base import TableHandle
    from lakeflow.settings import Settings

log = logging.getLogger(__name__)

S3_PLUGIN = "flink-s3-fs-hadoop"


def require_filesystem(location: str) -> None:
    """Fail before submitting when Flink cannot write ``location``: ``file://`` always works,
    ``s3://``/``s3a://`` need the flink-s3-fs-hadoop plugin — fetched and installed here into the
    wheel's own Flink when missing (:mod:`lakeflow.runtime.jars`); a ``$FLINK_PLUGINS_DIR`` of your own is
    never written to implicitly (``make flink-plugins`` installs there). Anything else is refused."""
    scheme = urlparse(location).scheme
    if scheme == "file":
        return
    if scheme in S3_SCHEMES:
        from lakeflow.runtime import jars

        folder = flink_plugins_dir()
        if jars.flink_plugin_installed(folder):
            install_table_filesystem(folder)
            return
        if process_environment("FLINK_PLUGINS_DIR").flink_plugins_dir:
            raise IngestError(
                f"the table location {location} is on S3, but Flink has no {S3_PLUGIN} plugin in "
                f"{folder} ($FLINK_PLUGINS_DIR): run `make flink-plugins` (fetches "
                f"{S3_PLUGIN}-{jars.flink_version()}.jar from Maven Central into it) and start again"
            )
        try:
            log.info("the table is on S3: installing Flink's %s plugin into %s", S3_PLUGIN, folder)
            jars.install_flink_plugin(folder)
            install_table_filesystem(folder)
        except (jars.JarsUnavailable, OSError) as exc:  # OSError: a read-only site-packages
            raise IngestError(
                f"the table location {location} is on S3, but Flink has no {S3_PLUGIN} plugin in "
                f"{folder} and it could not be fetched: {exc}. Once it is in place, `make flink-plugins` "
                "installs it; then start again"
            ) from None
        return
    raise IngestError(f"the table location {location!r} has scheme {scheme!r}: expected file:// or s3:// (s3a://)")


def install_table_filesystem(plugins: Path) -> None:
    """Put the helpers jar (its ``lakeflow-s3`` filesystem factory) into the S3 plugin's folder under
    ``plugins``, beside flink-s3-fs-hadoop whose S3 filesystem it configures per table; replaced when
    it differs (a new build)."""
    import filecmp
    import shutil

    from lakeflow.ingest.helpers_jar import JAR_NAME, jar_path
    from lakeflow.runtime.jars import PLUGIN_FOLDER

    source, target = jar_path(), plugins / PLUGIN_FOLDER / JAR_NAME
    if target.is_file() and filecmp.cmp(source, target, shallow=False):
        return
    try:
        tmp = target.with_name(f".{target.name}.tmp")
        shutil.copyfile(source, tmp)
        tmp.replace(target)
    except OSError as exc:
        raise IngestError(
            f"cannot put {source.name} into {target.parent} (the lakeflow-s3 filesystem, one per table): {exc}"
        ) from None


def table_filesystem_uri(location: str, namespace: Sequence[str], table: str) -> str:
    """The URI through which the sink writes ``location``: on S3 the table's own filesystem,
    ``lakeflow-s3://<namespace>.<table>@<bucket>/<key>``; any other location as it is."""
    parsed = urlparse(location)
    if parsed.scheme not in S3_SCHEMES:
        return location
    return f"{TABLE_SCHEME}://{'.'.join((*namespace, table))}@{parsed.netloc}{parsed.path}"


def table_filesystems(s3a: Mapping[str, str], command: str | None = None) -> dict[str, str]:
    """A process's configuration for writing S3 tables each through its own filesystem: ``s3a``'s
    settings without keys or credential provider (endpoint, path style, region), and the command that
    vends one table's credentials (default: this environment's ``lakeflow``)."""
    keyless = {k: v for k, v in s3a.items() if k not in CREDENTIAL_KEYS and k not in CREDENTIAL_SETTINGS}
    return {**keyless, CREDENTIAL_COMMAND: command or f"{Path(sys.executable).parent / 'lakeflow'}"}


def configure_filesystems(location: str, s3a: Mapping[str, str], *, in_process: bool) -> None:
    """Give the TaskManagers that write an S3 ``location`` the keyless settings of the tables' own
    filesystems (:func:`table_filesystems` of the table's ``s3a``): with an ``in_process``
    MiniCluster, initialise this JVM's filesystems with them (and the plugins folder). A cluster's
    TaskManagers have theirs from their config.yaml: under ``flink run``, check that the cluster's
    configuration can write the table (:func:`check_cluster`) before anything is submitted. Nothing
    for file://."""
    if urlparse(location).scheme not in S3_SCHEMES:
        return
    if not in_process:
        conf, where = cluster_configuration()
        check_cluster(location, s3a, conf, where)
        log.info(
            "the cluster's TaskManagers write %s with the fs.s3a.* settings of their config.yaml "
            "and the AWS profile in their environment (start the cluster with `lakeflow flink "
            "up`)",
            location,
        )
        return
    from pyflink.java_gateway import get_gateway

    jvm = get_gateway().jvm
    conf = jvm.org.apache.flink.configuration.Configuration()
    for key, value in table_filesystems(s3a).items():
        conf.setString(key, value)
    plugins = jvm.org.apache.flink.core.plugin.PluginUtils.createPluginManagerFromRootFolder(conf)
    jvm.org.apache.flink.core.fs.FileSystem.initialize(conf, plugins)


# Settings through which a Flink process's S3 filesystem gets credentials (Flink mirrors ``s3.*``
# keys to ``fs.s3a.*``). Without any of them S3A falls back to its default chain (environment
# variables, EC2/ECS instance roles): not the table's vended credentials.
CREDENTIAL_SETTINGS = (
    "fs.s3a.aws.credentials.provider",
    "s3.aws.credentials.provider",
    "fs.s3a.access.key",
    "s3.access-key",
    "s3.access.key",
)
ENDPOINT_SETTINGS = ("fs.s3a.endpoint", "s3.endpoint")
CREDENTIAL_KEYS = ("fs.s3a.access.key", "fs.s3a.secret.key", "fs.s3a.session.token", "s3.secret-key", "s3.secret.key")
TABLE_SCHEME = "lakeflow-s3"  # java/lakeflow/flink/fs/TableFileSystemFactory.java
CREDENTIAL_COMMAND = "lakeflow.fs.credential-command"  # … its configuration key


def cluster_configuration() -> tuple[dict[str, str], str]:
    """Under ``flink run``: the configuration of the cluster the job goes to — its JobManager's, read
    from its REST API (``GET /v1/jobmanager/config``) — else, when that cannot be read, the ``flink``
    client's own (its config.yaml and options); and a phrase naming where it came from."""
    import requests
    from pyflink.java_gateway import get_gateway

    from lakeflow.http import HttpOptions, new_session

    jvm = get_gateway().jvm
    client = {
        str(k): str(v)
        for k, v in jvm.org.apache.flink.streaming.api.environment.StreamExecutionEnvironment.getExecutionEnvironment()
        .getConfiguration()
        .toMap()
        .items()
    }
    if client.get("execution.target", "remote") != "remote":  # YARN, Kubernetes: their own config routes
        return {}, ""
    scheme = "https" if client.get("security.ssl.rest.enabled", "false").lower() == "true" else "http"
    rest = (
        f"{scheme}://{client.get('rest.address', 'localhost')}:{client.get('rest.port', '8081')}"
        f"{client.get('rest.path', '').rstrip('/')}"
    )
    try:
        with new_session(HttpOptions(timeout=5, max_retries=0)) as http:
            answer = http.get(f"{rest}/v1/jobmanager/config")
            answer.raise_for_status()
            return {str(e["key"]): str(e["value"]) for e in answer.json()}, f"the Flink cluster at {rest}"
    except (requests.RequestException, ValueError, KeyError, TypeError) as exc:
        log.debug(
            "cannot read the cluster's configuration from %s (%s): checking the client's", rest, type(exc).__name__
        )
        return client, "the flink client's configuration (FLINK_CONF_DIR)"


def _host(endpoint: str) -> str:
    return urlparse(endpoint if "://" in endpoint else f"//{endpoint}").netloc.lower()


def check_cluster(location: str, s3a: Mapping[str, str], conf: Mapping[str, str], where: str) -> None:
    """Refuse to submit a job for an S3 ``location`` to a cluster whose configuration ``conf`` points
    its S3 filesystem at another endpoint than the table's (``s3a``), or, when the catalog vends the
    table's credentials, names no command to vend them to the table's own filesystem
    (:data:`CREDENTIAL_COMMAND`): its TaskManagers could not write, and the job would fail only after
    every restart. Without vended keys a cluster that names no S3 credentials gets a warning (S3A's
    default chain — environment, instance roles — may still work on AWS). Nothing is checked when
    ``conf`` is empty (a YARN or Kubernetes target)."""
    if not conf:
        return
    fix = (
        "start the cluster with `lakeflow flink up` (its config.yaml: keyless fs.s3a.* settings and the command "
        "that vends each table's credentials to the table's own filesystem; docs/ingestion.md)"
    )
    wanted = s3a.get("fs.s3a.endpoint")
    have = next((conf[k] for k in ENDPOINT_SETTINGS if conf.get(k)), None)
    if wanted and (have is None or _host(have) != _host(wanted)):
        raise IngestError(
            f"{where} cannot write {location}: its S3 endpoint is "
            f"{have or 'not set (AWS S3)'}, the table's is {wanted}; {fix}"
        )
    if s3a.get("fs.s3a.access.key"):
        if not conf.get(CREDENTIAL_COMMAND):
            raise IngestError(
                f"{where} cannot write {location} with the table's vended credentials: its configuration "
                f"has no {CREDENTIAL_COMMAND}; {fix}"
            )
    elif not any(conf.get(k) for k in CREDENTIAL_SETTINGS):
        log.warning(
            "%s names no S3 credentials for %s (no fs.s3a.aws.credentials.provider or keys): its "
            "TaskManagers will use S3A's default chain; if writes are refused, %s",
            where,
            location,
            fix,
        )


@dataclass(frozen=True)
class ClusterStorage:
    """What a standalone cluster needs to write the pipeline's tables: ``conf`` for its config.yaml
    (keyless ``fs.s3a.*`` and the command that vends each table's credentials to its own
    filesystem; none for file://, nor the command when the catalog vends no keys: then the
    processes' own AWS credentials apply). ``handle``: the first stream's table, which it checked."""

    handle: TableHandle
    conf: dict[str, str] = field(default_factory=dict)


def cluster_storage(settings: Settings, profile_dir: Path) -> ClusterStorage:
    """The pipeline's first table (registered if need be, loaded with vended credentials; of a pipeline
    of topic patterns alone, a table of theirs already registered) and, for S3, the keyless settings
    of the tables' own filesystems, whose credential command reads the catalog settings from a
    private file under ``profile_dir``."""
    from lakeflow.aws_profile import catalog_command, catalog_settings
    from lakeflow.catalog import TableNotFound, open_catalog
    from lakeflow.streams import load_pipeline

    pipeline = load_pipeline(settings)
    with open_catalog(settings) as catalog:
        first = next(iter(pipeline.streams()), None)
        for pattern in pipeline.patterns if first is None else ():
            try:
                listed = [t.name for t in catalog.list_tables(pattern.namespace)]
            except TableNotFound:  # no namespace yet
                listed = []
            first = first or next(iter(pipeline.streams_of_tables(listed)), None)
        if first is None:
            raise IngestError(
                f"{pipeline.source}: the cluster learns the warehouse's storage from a table of the pipeline, and "
                "none of its topic patterns' tables is registered yet: run the job once without the cluster "
                "(`make run`), or register one (`lakeflow register --namespace … --table …`)"
            )
        catalog.register(first.namespace, first.table)
        handle = catalog.load(first.namespace, first.table, vended=True)
    require_filesystem(handle.location)
    if urlparse(handle.location).scheme not in S3_SCHEMES:
        return ClusterStorage(handle)
    s3a = handle.s3a(settings.s3_endpoint)
    if not handle.storage.has_keys:
        return ClusterStorage(handle, s3a.flink())
    command = catalog_command(profile_dir, catalog_settings(settings, handle.ident.warehouse))
    return ClusterStorage(handle, table_filesystems(s3a.flink(), command))
