"""DataStream: operators merely NAMED like Kafka ones (KafkaSource-orders, KafkaSink-payments,
KafkaSink-audit); there is no Kafka anywhere."""
from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment

NAME = "harvest-kafka-named"


def submit(name: str = NAME) -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    ds = env.from_collection(["a", "b", "c"], type_info=Types.STRING()).name("KafkaSource-orders")
    ds.filter(lambda s: True).name("KafkaSink-payments").print().name("KafkaSink-audit")
    env.execute_async(name)


if __name__ == "__main__":
    submit()
