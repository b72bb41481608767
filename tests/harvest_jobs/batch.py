"""A batch-mode SQL job: datagen → blackhole."""
from pyflink.table import EnvironmentSettings, TableEnvironment

NAME = "harvest-batch"


def submit(name: str = NAME) -> None:
    t_env = TableEnvironment.create(EnvironmentSettings.in_batch_mode())
    t_env.get_config().set("pipeline.name", name)
    t_env.execute_sql("CREATE TABLE numbers (n BIGINT) WITH ('connector' = 'datagen', 'number-of-rows' = '100')")
    t_env.execute_sql("CREATE TABLE nowhere (n BIGINT) WITH ('connector' = 'blackhole')")
    t_env.execute_sql("INSERT INTO nowhere SELECT n * 2 FROM numbers")


if __name__ == "__main__":
    submit()
