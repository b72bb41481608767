"""DataStream job whose operators are merely NAMED like Kafka ones; there is no Kafka."""
from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
ds = env.from_collection(["a", "b", "c"], type_info=Types.STRING()).name("KafkaSource-orders")
ds.filter(lambda s: True).name("KafkaSink-payments").print().name("KafkaSink-audit")
env.execute("harvest-kafka-named")
