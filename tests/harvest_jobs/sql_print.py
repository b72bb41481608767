"""SQL job: datagen → print, bounded."""
from pyflink.table import EnvironmentSettings, TableEnvironment

t_env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
t_env.get_config().set("pipeline.name", "harvest-sql-print")
t_env.execute_sql("""CREATE TABLE clicks (user_id BIGINT, url STRING)
  WITH ('connector' = 'datagen', 'number-of-rows' = '20')""")
t_env.execute_sql("CREATE TABLE console (user_id BIGINT, url STRING) WITH ('connector' = 'print')")
t_env.execute_sql("INSERT INTO console SELECT user_id, url FROM clicks WHERE user_id > 0")
