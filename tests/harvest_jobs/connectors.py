"""Jobs on the real connectors submitted from one client (``flink run -py``). Arguments: Kafka
bootstrap servers, the FileSink's folder, the folder of the filesystem tables, the JDBC URL of the
``shop`` database; its user and password come in ``LINEAGE_JDBC_USER`` / ``LINEAGE_JDBC_PASSWORD``
(never on a command line).

DataStream jobs — the names the user gives their operators are all a plan shows of them:

- ``ds-kafka-to-kafka``: ``KafkaSource`` (topic ``orders``) → ``KafkaSink`` (topic ``ds_orders``);
- ``ds-file-sink``: a number sequence → ``FileSink`` into the folder;
- ``ds-named-like-kafka``: operators merely named ``KafkaSource-orders`` / ``KafkaSink-payments``
  reading a collection (no Kafka anywhere).

Table API jobs whose tables exist only in this program (job-local: a temporary table, and a table of
the program's in-memory ``default_catalog``), which no SQL Gateway session can look up:

- ``local-kafka-to-jdbc``: Kafka topic ``orders`` → the PostgreSQL table ``orders_local``;
- ``local-batch-filesystem`` (batch): PostgreSQL ``customers`` → a filesystem table ``archive``
  (the identifier a SQL Gateway job gives another path: the same name, two datasets).

No Python function runs in any of them (no Python worker: the JVM does it all)."""

import os
import sys

from pyflink.common import Encoder, Types, WatermarkStrategy
from pyflink.common.serialization import SimpleStringSchema
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.connectors.file_system import FileSink
from pyflink.datastream.connectors.kafka import (
    KafkaOffsetsInitializer,
    KafkaRecordSerializationSchema,
    KafkaSink,
    KafkaSource,
)
from pyflink.datastream.connectors.number_seq import NumberSequenceSource
from pyflink.table import EnvironmentSettings, TableEnvironment


def kafka_to_kafka(bootstrap: str) -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    source = (KafkaSource.builder().set_bootstrap_servers(bootstrap).set_topics("orders")
              .set_group_id("ds-kafka-to-kafka").set_starting_offsets(KafkaOffsetsInitializer.earliest())
              .set_value_only_deserializer(SimpleStringSchema()).build())
    sink = (KafkaSink.builder().set_bootstrap_servers(bootstrap)
            .set_record_serializer(KafkaRecordSerializationSchema.builder().set_topic("ds_orders")
                                   .set_value_serialization_schema(SimpleStringSchema()).build()).build())
    env.from_source(source, WatermarkStrategy.no_watermarks(), "orders-in").sink_to(sink).name("orders-out")
    env.execute_async("ds-kafka-to-kafka")


def file_sink(folder: str) -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    sink = FileSink.for_row_format(folder, Encoder.simple_string_encoder()).build()
    env.from_source(NumberSequenceSource(1, 100), WatermarkStrategy.no_watermarks(), "numbers").sink_to(sink) \
        .name("numbers-out")
    env.execute_async("ds-file-sink")


def named_like_kafka() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    ds = env.from_collection(["a", "b", "c"], type_info=Types.STRING()).name("KafkaSource-orders")
    ds.print().name("KafkaSink-payments")
    env.execute_async("ds-named-like-kafka")


def _tables(name: str, settings: EnvironmentSettings) -> TableEnvironment:
    t_env = TableEnvironment.create(settings)
    t_env.get_config().set("pipeline.name", name)
    t_env.get_config().set("parallelism.default", "1")
    return t_env


def _jdbc(url: str, table: str) -> str:
    user, password = os.environ["LINEAGE_JDBC_USER"], os.environ["LINEAGE_JDBC_PASSWORD"]
    return (f"'connector' = 'jdbc', 'url' = '{url}', 'table-name' = '{table}', 'username' = '{user}', "
            f"'password' = '{password}'")


def local_kafka_to_jdbc(bootstrap: str, jdbc_url: str) -> None:
    t_env = _tables("local-kafka-to-jdbc", EnvironmentSettings.in_streaming_mode())
    t_env.execute_sql("CREATE TEMPORARY TABLE orders (id BIGINT, customer_id BIGINT, amount DOUBLE) WITH ("
                      f"'connector' = 'kafka', 'topic' = 'orders', 'properties.bootstrap.servers' = '{bootstrap}', "
                      "'properties.group.id' = 'local-kafka-to-jdbc', 'scan.startup.mode' = 'earliest-offset', "
                      "'format' = 'json')")
    t_env.execute_sql("CREATE TABLE orders_local (id BIGINT, customer_id BIGINT, amount DOUBLE) WITH ("
                      f"{_jdbc(jdbc_url, 'orders_local')})")
    t_env.execute_sql("INSERT INTO orders_local SELECT * FROM orders")


def local_batch_filesystem(jdbc_url: str, files: str) -> None:
    t_env = _tables("local-batch-filesystem", EnvironmentSettings.in_batch_mode())
    t_env.execute_sql(f"CREATE TABLE customers (id BIGINT, name STRING) WITH ({_jdbc(jdbc_url, 'customers')})")
    t_env.execute_sql("CREATE TEMPORARY TABLE archive (id BIGINT, name STRING) WITH ('connector' = 'filesystem', "
                      f"'path' = '{files}/local-customers', 'format' = 'json')")
    t_env.execute_sql("INSERT INTO archive SELECT id, name FROM customers")


if __name__ == "__main__":
    bootstrap_servers, numbers, tables, shop = sys.argv[1:5]
    kafka_to_kafka(bootstrap_servers)
    file_sink(numbers)
    named_like_kafka()
    local_kafka_to_jdbc(bootstrap_servers, shop)
    local_batch_filesystem(shop, tables)
