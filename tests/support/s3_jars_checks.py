"""Real S3A clients against an S3 endpoint, for tests/integration/test_jars.py (run as its own process).

    python tests/support/s3_jars_checks.py spark CREDS_JSON JARS_CSV BASE_URI...   (Spark local[1], hadoop-aws + SDK v2)
    python tests/support/s3_jars_checks.py flink CREDS_JSON BASE_URI               (PyFlink FileSink, flink-s3-fs-hadoop)

CREDS_JSON: {"endpoint", "access_key", "secret_key", "session_token"} (assumed-role credentials).
Each BASE_URI gets written and read back; prints one ``OK <uri> <count>`` line per URI.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def s3a_settings(creds: dict) -> dict[str, str]:
    """What lakeflow.credentials.to_s3a produces for vended STS credentials on a path-style endpoint."""
    return {"fs.s3a.access.key": creds["access_key"], "fs.s3a.secret.key": creds["secret_key"],
            "fs.s3a.session.token": creds["session_token"],
            "fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider",
            "fs.s3a.endpoint": creds["endpoint"], "fs.s3a.path.style.access": "true",
            "fs.s3a.endpoint.region": "us-east-1", "fs.s3a.connection.ssl.enabled": "false",
            "fs.s3a.attempts.maximum": "1", "fs.s3a.retry.limit": "1"}


def spark(creds: dict, jars: str, uris: list[str]) -> None:
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master("local[1]").config("spark.jars", jars)
               .config("spark.ui.enabled", "false").config("spark.log.level", "ERROR")
               .config("spark.hadoop.fs.s3.impl", "org.apache.hadoop.fs.s3a.S3AFileSystem"))
    for key, value in s3a_settings(creds).items():
        builder = builder.config(f"spark.hadoop.{key}", value)
    session = builder.getOrCreate()
    for uri in uris:
        session.range(100).selectExpr("id", "cast(id as string) AS s").write.mode("overwrite").parquet(uri)
        print("OK", uri, session.read.parquet(uri).count(), flush=True)


def flink(creds: dict, uri: str) -> None:
    from pyflink.common import Configuration, Types
    from pyflink.common.serialization import Encoder
    from pyflink.datastream import StreamExecutionEnvironment
    from pyflink.datastream.connectors.file_system import FileSink, RollingPolicy

    from pyflink.java_gateway import get_gateway

    conf = Configuration()
    conf.set_string("python.executable", sys.executable)
    conf.set_string("execution.checkpointing.interval", "1s")
    conf.set_string("restart-strategy.type", "none")
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    jvm = get_gateway().jvm  # this JVM's S3 filesystem with the keys (lakeflow's jobs give each table its own)
    keys = jvm.org.apache.flink.configuration.Configuration()
    for key, value in s3a_settings(creds).items():
        keys.setString(key, value)
    jvm.org.apache.flink.core.fs.FileSystem.initialize(
        keys, jvm.org.apache.flink.core.plugin.PluginUtils.createPluginManagerFromRootFolder(keys))
    env.set_parallelism(1)
    lines = env.from_collection([f"line {i}" for i in range(1000)], type_info=Types.STRING())
    lines.sink_to(FileSink.for_row_format(uri, Encoder.simple_string_encoder())
                  .with_rolling_policy(RollingPolicy.on_checkpoint_rolling_policy()).build())
    env.execute("s3 FileSink")
    print("OK", uri, flush=True)


if __name__ == "__main__":
    mode, creds = sys.argv[1], json.loads(Path(sys.argv[2]).read_text())
    if mode == "spark":
        spark(creds, sys.argv[3], sys.argv[4:])
    else:
        flink(creds, sys.argv[3])
