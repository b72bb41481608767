"""The jars S3 and the SQL Gateway need, from Maven Central, matched to the installed wheels and
fetched when needed.

The sets, each cached in its own folder under ``build/jars/`` (``$LAKEFLOW_JARS_DIR``):

- **flink** — ``org.apache.flink:flink-s3-fs-hadoop`` of the apache-flink wheel's version
  (``build/jars/flink-<version>/``), installed as the plugin folder ``plugins/s3-fs-hadoop/`` of
  the wheel's Flink distribution (``pyflink/``; :func:`lakeflow.runtime.homes.flink_plugins_dir`), the
  one ``make run``, ``make cluster-up`` and ``flink run`` use.
- **spark** — ``org.apache.hadoop:hadoop-aws`` of exactly the Hadoop version in pyspark's
  ``jars/`` (read from ``hadoop-client-api-<version>.jar``), with the AWS SDK v2 modules S3A uses
  (s3, sts, s3-transfer-manager and their runtime dependencies) at the SDK version that Hadoop
  version declares, instead of the ~0.7 GB ``software.amazon.awssdk:bundle``
  (``build/jars/spark-hadoop-<version>/``).
- **sql-gateway** — ``org.apache.flink:flink-sql-gateway`` of the apache-flink wheel's version
  (``build/jars/flink-sql-gateway-<version>/``): the wheel has ``bin/sql-gateway.sh`` but not the
  jar it looks for in ``opt/``; :meth:`lakeflow.runtime.flink_cluster.FlinkCluster.start_sql_gateway`
  puts it on the gateway's own classpath (the wheel's folders stay as they are).
- **kafka-connector** — ``org.apache.flink:flink-sql-connector-kafka`` (Flink 2.x build,
  ``build/jars/flink-sql-connector-kafka-<version>/``) and **jdbc-connector** —
  ``flink-connector-jdbc-core`` + ``-postgres`` with the PostgreSQL driver
  (``build/jars/flink-connector-jdbc-<version>/``): for a cluster's ``lib/``
  (:class:`lakeflow.runtime.flink_cluster.FlinkCluster` ``lib_jars``) and its SQL Gateway, as the
  lineage tests run them.
- **kafka-broker** — ``org.apache.kafka:kafka_2.13`` + ``kafka-tools`` with their runtime
  dependencies (``build/jars/kafka-<version>/``): the local broker :mod:`lakeflow.runtime.kafka`
  runs (``lakeflow demo --source kafka``, the tests, the benchmarks).

Maven (:func:`lakeflow.runtime.maven.mvn`: ``mvn`` on PATH, else Maven's own distribution fetched
from Maven Central into ``build/maven/``) resolves and downloads them
(``build-support/jars/*.pom.xml``, ``--strict-checksums``: every file is
checked against the checksum the repository publishes beside it, and the build fails on a
mismatch or a missing checksum); it honours ``~/.m2/settings.xml`` (mirrors, proxies), and
``$MAVEN_REPO`` replaces every remote repository by one URL. Maven's own repository is
``build/jars/m2``. A folder is complete once it holds its key jar (it is filled in a temporary
folder and renamed): pre-seeding an offline machine means copying ``build/jars/<set>/`` there.
``LAKEFLOW_JARS_OFFLINE=1`` never starts Maven. Command line: ``lakeflow jars [flink]
[spark] [sql-gateway] [kafka-connector] [jdbc-connector] [kafka-broker]`` (``make s3-jars``, ``make flink-plugins``,
``make s3a-jars``, ``make sql-gateway-jar``, ``make connector-jars``, ``make kafka-broker``).
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, distributions, version
from pathlib import Path
from xml.sax.saxutils import escape

from lakeflow.errors import LakeflowError
from lakeflow.runtime import maven
from lakeflow.runtime.homes import flink_distribution, flink_home, flink_plugins_dir, spark_home
from lakeflow.runtime.maven import MavenUnavailable

log = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parents[2]
POMS = REPO / "build-support" / "jars"
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
FLINK_S3_PLUGIN = "flink-s3-fs-hadoop"
SQL_GATEWAY = "flink-sql-gateway"
KAFKA_CONNECTOR = "flink-sql-connector-kafka"
KAFKA_VERSION = "4.1.1"  # the local broker of lakeflow.runtime.kafka
KAFKA_CONNECTOR_VERSION = "5.0.0-2.2"  # the newest for Flink 2.x; runs on 2.3.0
JDBC_CONNECTOR = "flink-connector-jdbc"
JDBC_CONNECTOR_VERSION = "4.0.0-2.0"  # 4.1.x for Flink 2.x is not on Maven Central
PLUGIN_FOLDER = "s3-fs-hadoop"
SDK_MODULES = ("s3", "sts", "s3-transfer-manager")
MAVEN_TIMEOUT_S = 1800.0


class JarsUnavailable(LakeflowError, RuntimeError):
    """The jars are neither in their folder nor fetchable; the message says what to put where."""


def jars_dir() -> Path:
    """Where the sets are cached: ``$LAKEFLOW_JARS_DIR``, else the checkout's ``build/jars``."""
    return Path(os.environ.get("LAKEFLOW_JARS_DIR") or REPO / "build" / "jars").resolve()


def offline() -> bool:
    return os.environ.get("LAKEFLOW_JARS_OFFLINE", "").lower() in ("1", "true", "yes")


# --- the versions, from the installed wheels -----------------------------------------------------


def flink_version() -> str:
    """The apache-flink wheel's version (the Flink distribution inside it): this environment's, else
    the ingestion environment's (:func:`lakeflow.runtime.homes.flink_home`)."""
    try:
        return version("apache-flink")
    except PackageNotFoundError:
        pass
    try:
        return next(iter(distributions(name="apache-flink", path=[str(flink_home().parent)]))).version
    except (FileNotFoundError, StopIteration):
        raise JarsUnavailable("apache-flink is installed neither here nor in .venv-flink: make install") from None


def pyspark_jars_dir() -> Path:
    """pyspark's ``jars/`` folder."""
    try:
        return spark_home() / "jars"
    except FileNotFoundError as exc:
        raise JarsUnavailable(str(exc)) from None


_HADOOP_CLIENT = re.compile(r"^hadoop-client-api-(\d+\.\d+\.\d+[\w.-]*)\.jar$")


def hadoop_version(spark_jars: Path | None = None) -> str:
    """The Hadoop version Spark runs: from ``hadoop-client-api-<version>.jar`` in pyspark's jars/."""
    folder = spark_jars or pyspark_jars_dir()
    found = sorted({m.group(1) for p in folder.glob("hadoop-client-api-*.jar") if (m := _HADOOP_CLIENT.match(p.name))})
    if len(found) != 1:
        raise JarsUnavailable(
            f"expected one hadoop-client-api-<version>.jar in {folder}, found "
            f"{found or 'none'}: cannot tell which hadoop-aws matches this Spark"
        )
    return found[0]


# --- the sets -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class JarSet:
    """One folder of jars, resolved by Maven from one POM template."""

    name: str  # flink | spark | sql-gateway | kafka-connector | jdbc-connector
    version: str  # the wheel's Flink version / pyspark's Hadoop version
    key_jar: str  # the jar whose presence makes the folder complete
    template: str  # file under build-support/jars/
    placeholder: str  # replaced by ``version`` in the template
    artifacts: str  # what it holds, for messages
    prefix: str  # the folder is ``<prefix>-<version>``
    make_target: str = "s3-jars"  # what fetches it where Maven Central is reachable

    @property
    def folder(self) -> Path:
        return jars_dir() / f"{self.prefix}-{self.version}"

    def ready(self) -> bool:
        return (self.folder / self.key_jar).is_file()

    def jars(self) -> list[Path]:
        return sorted(self.folder.glob("*.jar"))

    def pom(self) -> str:
        return (POMS / self.template).read_text().replace(self.placeholder, self.version)


def flink_set() -> JarSet:
    v = flink_version()
    return JarSet(
        "flink",
        v,
        f"{FLINK_S3_PLUGIN}-{v}.jar",
        "flink-s3-fs-hadoop.pom.xml",
        "@FLINK_VERSION@",
        f"org.apache.flink:{FLINK_S3_PLUGIN}:{v} (one shaded jar, ~32 MB)",
        "flink",
    )


def spark_set() -> JarSet:
    v = hadoop_version()
    return JarSet(
        "spark",
        v,
        f"hadoop-aws-{v}.jar",
        "spark-hadoop-aws.pom.xml",
        "@HADOOP_VERSION@",
        f"org.apache.hadoop:hadoop-aws:{v} with the AWS SDK v2 modules software.amazon.awssdk:"
        f"{{{','.join(SDK_MODULES)}}} at the version hadoop-aws {v} declares (property "
        f"aws-java-sdk-v2.version of org.apache.hadoop:hadoop-project:{v}) and their runtime "
        "dependencies except those pyspark ships (~13 MB, 37 jars for Hadoop 3.5.0)",
        "spark-hadoop",
    )


def sql_gateway_set() -> JarSet:
    v = flink_version()
    return JarSet(
        "sql-gateway",
        v,
        f"{SQL_GATEWAY}-{v}.jar",
        "flink-sql-gateway.pom.xml",
        "@FLINK_VERSION@",
        f"org.apache.flink:{SQL_GATEWAY}:{v} (one jar, ~1 MB; the rest is in the wheel's lib/)",
        SQL_GATEWAY,
        "sql-gateway-jar",
    )


def kafka_connector_set() -> JarSet:
    v = KAFKA_CONNECTOR_VERSION
    return JarSet(
        "kafka-connector",
        v,
        f"{KAFKA_CONNECTOR}-{v}.jar",
        f"{KAFKA_CONNECTOR}.pom.xml",
        "@VERSION@",
        f"org.apache.flink:{KAFKA_CONNECTOR}:{v} (one shaded jar, ~11 MB)",
        KAFKA_CONNECTOR,
        "connector-jars",
    )


def kafka_broker_set() -> JarSet:
    v = KAFKA_VERSION
    return JarSet(
        "kafka-broker",
        v,
        f"kafka_2.13-{v}.jar",
        "kafka-broker.pom.xml",
        "@VERSION@",
        f"org.apache.kafka:kafka_2.13:{v} + kafka-tools:{v} and their runtime dependencies (~56 MB, 92 jars)",
        "kafka",
        "kafka-broker",
    )


def jdbc_connector_set() -> JarSet:
    v = JDBC_CONNECTOR_VERSION
    return JarSet(
        "jdbc-connector",
        v,
        f"{JDBC_CONNECTOR}-core-{v}.jar",
        f"{JDBC_CONNECTOR}.pom.xml",
        "@VERSION@",
        f"org.apache.flink:{JDBC_CONNECTOR}-core:{v} + {JDBC_CONNECTOR}-postgres:{v} + "
        "org.postgresql:postgresql:42.7.8 (~1.5 MB)",
        JDBC_CONNECTOR,
        "connector-jars",
    )


SETS = {
    "flink": flink_set,
    "spark": spark_set,
    "sql-gateway": sql_gateway_set,
    "kafka-connector": kafka_connector_set,
    "kafka-broker": kafka_broker_set,
    "jdbc-connector": jdbc_connector_set,
}
DEFAULT_SETS = ("flink", "spark", "sql-gateway")


# --- fetching -------------------------------------------------------------------------------------


def fetch(jar_set: JarSet, *, maven_repo: str | None = None, timeout_s: float = MAVEN_TIMEOUT_S) -> list[Path]:
    """The set's jars: from its folder, else resolved and downloaded by Maven into it."""
    if jar_set.ready():
        return jar_set.jars()
    if offline():
        raise JarsUnavailable(_missing(jar_set, "LAKEFLOW_JARS_OFFLINE is set, so Maven is not started"))
    try:
        mvn = maven.mvn()
    except MavenUnavailable as exc:
        raise JarsUnavailable(_missing(jar_set, f"no Maven: {exc}")) from None
    root = jars_dir()
    work = root / "poms"
    work.mkdir(parents=True, exist_ok=True)
    pom = work / f"{jar_set.name}-{jar_set.version}.pom.xml"
    pom.write_text(jar_set.pom())
    staging = Path(tempfile.mkdtemp(prefix=f".{jar_set.folder.name}-", dir=root))
    cmd = [
        mvn,
        "-B",
        "-q",
        "--strict-checksums",
        "-f",
        str(pom),
        f"-Dmaven.repo.local={root / 'm2'}",
        f"{DEPENDENCY_PLUGIN}:copy-dependencies",
        f"-DoutputDirectory={staging}",
        "-DincludeScope=runtime",
    ]
    repo = maven_repo or os.environ.get("MAVEN_REPO")
    if repo:
        settings = work / "mirror-settings.xml"
        settings.write_text(_mirror_settings(repo))
        cmd[1:1] = ["-s", str(settings)]
    log.info("fetching %s with Maven into %s", jar_set.artifacts, jar_set.folder)
    started = time.monotonic()
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, cwd=work)
        if done.returncode != 0 or not (staging / jar_set.key_jar).is_file():
            raise JarsUnavailable(_missing(jar_set, "Maven failed" + _maven_errors(done.stdout + done.stderr)))
        if not jar_set.folder.exists():
            staging.rename(jar_set.folder)
        elif not jar_set.ready():  # a partial folder made by hand: complete it (same names replaced)
            for jar in staging.glob("*.jar"):
                jar.replace(jar_set.folder / jar.name)
        # else another process finished the same fetch first: keep its folder
    except subprocess.TimeoutExpired:
        raise JarsUnavailable(_missing(jar_set, f"Maven did not finish within {timeout_s:.0f} s")) from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    jars = jar_set.jars()
    log.info(
        "fetched %d jars (%.1f MB) in %.1f s",
        len(jars),
        sum(j.stat().st_size for j in jars) / 1e6,
        time.monotonic() - started,
    )
    return jars


def _mirror_settings(url: str) -> str:
    return f"""<settings xmlns="http://maven.apache.org/SETTINGS/1.0.0">
  <mirrors>
    <mirror><id>lakeflow-maven-repo</id><mirrorOf>*</mirrorOf><url>{escape(url)}</url></mirror>
  </mirrors>
</settings>
"""


def _maven_errors(output: str, limit: int = 6) -> str:
    """Maven's own explanation: its first [ERROR] lines, without the help boilerplate."""
    lines = []
    for line in re.sub(r"\x1b\[[0-9;]*m", "", output).splitlines():
        text = line.removeprefix("[ERROR]").strip()
        if (
            line.startswith("[ERROR]")
            and text
            and not text.startswith(("->", "[Help", "Re-run", "For more", "To see the full"))
        ):
            lines.append(text)
    return (": " + " | ".join(lines[:limit])) if lines else ""


def _missing(jar_set: JarSet, reason: str) -> str:
    return (
        f"cannot fetch the {jar_set.name} jars ({reason}). Needed: {jar_set.artifacts}. "
        f"Fetch them where Maven Central (or $MAVEN_REPO) is reachable with `make {jar_set.make_target}`, then copy "
        f"{jar_set.folder}/ to this machine (same path, or set LAKEFLOW_JARS_DIR to its parent); "
        f"the folder counts as complete once {jar_set.key_jar} is in it"
    )


# --- what the jobs call ---------------------------------------------------------------------------


def flink_plugin_installed(plugins: Path | None = None) -> Path | None:
    """The installed flink-s3-fs-hadoop jar in ``plugins`` (default: Flink's plugins folder), if any."""
    found = sorted((plugins or flink_plugins_dir()).glob(f"*/{FLINK_S3_PLUGIN}-*.jar"))
    return found[0] if found else None


def install_flink_plugin(plugins: Path | None = None, source: Path | None = None) -> Path:
    """Put ``flink-s3-fs-hadoop-<version>.jar`` into ``<plugins>/s3-fs-hadoop/``: copied from ``source``,
    else from ``$FLINK_HOME/opt`` (a Flink distribution of the wheel's version), else fetched from
    Maven; return its path."""
    jar_set = flink_set()
    target = (plugins or flink_plugins_dir()) / PLUGIN_FOLDER / jar_set.key_jar
    if target.is_file():
        return target
    if source is None and (distribution := flink_distribution()):
        source = distribution / "opt" / jar_set.key_jar
        if not source.is_file():
            raise JarsUnavailable(
                f"{source} not found: FLINK_HOME={os.environ['FLINK_HOME']} should be a Flink "
                f"{jar_set.version} distribution (its opt/ folder holds {source.name}); "
                "unset FLINK_HOME to fetch the plugin from Maven Central"
            )
    if source is None:
        source = jar_set.folder / jar_set.key_jar
        fetch(jar_set)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)  # atomic for concurrent installs
    os.close(fd)
    shutil.copyfile(source, tmp)
    Path(tmp).replace(target)
    log.info("installed %s", target)
    return target


def spark_s3_jars() -> list[Path]:
    """hadoop-aws + AWS SDK v2 jars for pyspark's Hadoop (fetched if need be), for ``spark.jars``."""
    return fetch(spark_set())


def sql_gateway_jar() -> Path:
    """``flink-sql-gateway-<version>.jar`` of the wheel's Flink version (fetched if need be)."""
    jar_set = sql_gateway_set()
    fetch(jar_set)
    return jar_set.folder / jar_set.key_jar


def connector_jars() -> list[Path]:
    """The Kafka and JDBC (PostgreSQL) connector jars for a cluster's ``lib/`` (fetched if need be)."""
    return [*fetch(kafka_connector_set()), *fetch(jdbc_connector_set())]


def ensure_jars(names: Sequence[str]) -> dict[str, list[Path]]:
    """Fetch (if need be) the named sets; install the Flink plugin. Raises :class:`JarsUnavailable`."""
    out: dict[str, list[Path]] = {}
    for name in names:
        out[name] = [install_flink_plugin()] if name == "flink" else fetch(SETS[name]())
    return out
