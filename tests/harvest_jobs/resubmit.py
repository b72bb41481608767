"""One job name, submitted twice: ``fail`` makes the run fail (a bad CAST, no restarts)."""
import sys

from pyflink.table import EnvironmentSettings, TableEnvironment

NAME = "harvest-resubmitted"


def submit(fail: bool, name: str = NAME) -> None:
    t_env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    t_env.get_config().set("pipeline.name", name)
    t_env.get_config().set("restart-strategy.type", "none")
    t_env.execute_sql("""CREATE TABLE src (n BIGINT, s STRING)
      WITH ('connector' = 'datagen', 'number-of-rows' = '10', 'fields.s.length' = '3')""")
    t_env.execute_sql("CREATE TABLE sink (n BIGINT, v INT) WITH ('connector' = 'blackhole')")
    value = "CAST(s AS INT)" if fail else "CHAR_LENGTH(s)"
    t_env.execute_sql(f"INSERT INTO sink SELECT n, {value} FROM src")


if __name__ == "__main__":
    submit(len(sys.argv) > 1 and sys.argv[1] == "fail")
