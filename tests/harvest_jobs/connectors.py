"""DataStream jobs on the real connectors, submitted from one client (``flink run -py``): the names
the user gives their operators are all a plan shows of them. Arguments: Kafka bootstrap servers,
the FileSink's folder.

- ``ds-kafka-to-kafka``: ``KafkaSource`` (topic ``orders``) → ``KafkaSink`` (topic ``ds_orders``);
- ``ds-file-sink``: a number sequence → ``FileSink`` into the folder;
- ``ds-named-like-kafka``: operators merely named ``KafkaSource-orders`` / ``KafkaSink-payments``
  reading a collection (no Kafka anywhere).

No Python function runs in the first two (no Python worker: the JVM does it all)."""

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


if __name__ == "__main__":
    kafka_to_kafka(sys.argv[1])
    file_sink(sys.argv[2])
    named_like_kafka()
