"""Variables read straight from the process environment (never from ``.env.local``) by the modules
named in each description: they set up processes, paths and tools before settings are loaded."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from lakeflow.settings.env import EnvModel, Port, PositiveInt, load_only


class ProcessEnvironment(EnvModel):
    """Read from the environment only (not from .env.local)."""

    env_file: str | None = Field(
        None, alias="LAKEFLOW_ENV_FILE", description="The dotenv file lakeflow reads (default ./.env.local)."
    )
    jar: Path | None = Field(
        None,
        alias="LAKEFLOW_JAR",
        description="The JVM helpers jar (JSON-array writer, sensor clock); default "
        "build/lakeflow-flink.jar (make jar).",
    )
    flink_log_dir: str | None = Field(
        None,
        alias="FLINK_LOG_DIR",
        description="Flink's own: where the job's Flink logs go (default $LAKEFLOW_HOME/log).",
    )
    flink_plugins_dir: str | None = Field(
        None,
        alias="FLINK_PLUGINS_DIR",
        description="Flink's own: the plugin folder (default the apache-flink wheel's pyflink/plugins; s3:// "
        "tables need flink-s3-fs-hadoop there).",
    )
    flink_home: str | None = Field(
        None,
        alias="FLINK_HOME",
        description="make flink-plugins: a Flink distribution of the wheel's version to copy "
        "flink-s3-fs-hadoop from (its opt/) instead of fetching it.",
    )
    maven_repo: str | None = Field(
        None,
        alias="MAVEN_REPO",
        description="The S3 jars (docs/s3.md; make s3-jars) come from Maven, checksums verified: this URL "
        "replaces every remote repository (a mirror).",
    )
    jars_dir: str | None = Field(
        None,
        alias="LAKEFLOW_JARS_DIR",
        description="The jar cache, and the Spark driver's class archive in its cds/ (default build/jars).",
    )
    java_home: str | None = Field(
        None,
        alias="JAVA_HOME",
        description="The Java installation Flink and Spark run on (default: java on PATH); make spark-cds "
        "builds the class archive for it.",
    )
    arrow_memory_pool: str | None = Field(
        None,
        alias="ARROW_DEFAULT_MEMORY_POOL",
        description="pyarrow's own: the Arrow memory pool (jemalloc, mimalloc or system); unset, the arrow "
        "engine of lakeflow compact allocates from jemalloc (docs/compaction.md), the rest from pyarrow's default.",
    )
    jars_offline: str | None = Field(
        None, alias="LAKEFLOW_JARS_OFFLINE", description="1: never start Maven (pre-seeded jar folders only)."
    )
    mvn: str | None = Field(
        None,
        alias="MVN",
        description="The Maven executable (default: mvn on PATH, else Apache Maven fetched from Maven Central "
        "into build/maven/, make maven).",
    )
    flink_rest_port: Port = Field(
        8081,
        alias="FLINK_REST_PORT",
        description="make cluster-up: the local standalone cluster's REST/web UI port on localhost.",
    )
    flink_rpc_port: Port = Field(
        6123, alias="FLINK_RPC_PORT", description="make cluster-up: the local standalone cluster's JobManager RPC port."
    )
    flink_sql_gateway_port: Port | None = Field(
        None,
        alias="FLINK_SQL_GATEWAY_PORT",
        description="make cluster-up: also start Flink's SQL Gateway, REST on 127.0.0.1:PORT (unset: no gateway).",
    )
    flink_metrics_port: Port | None = Field(
        None,
        alias="FLINK_METRICS_PORT",
        description="make cluster-up: serve Prometheus metrics, the JobManager's on this port, each "
        "TaskManager's on the next free one of PORT+1…PORT+7 (unset: none; docs/operations.md).",
    )
    spark_master_port: Port = Field(
        7077, alias="SPARK_MASTER_PORT", description="make spark-up: the standalone Spark master's port."
    )
    spark_master_webui_port: Port = Field(
        0,
        alias="SPARK_MASTER_WEBUI_PORT",
        description="make spark-up: the master's web UI port on 127.0.0.1 (0: a free one).",
    )
    spark_worker_cores: PositiveInt = Field(
        2, alias="SPARK_WORKER_CORES", description="make spark-up: the worker's cores."
    )
    spark_worker_memory: str = Field(
        "1g", alias="SPARK_WORKER_MEMORY", description="make spark-up: the worker's memory for executors."
    )


def process_environment(*names: str) -> ProcessEnvironment:
    """The variables ``names`` of the process environment (no dotenv file), the others at their
    defaults: a bad value of a variable not asked for cannot fail the caller."""
    return load_only(ProcessEnvironment, names, "process settings")
