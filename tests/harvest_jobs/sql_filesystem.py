"""SQL job: datagen → filesystem (json), bounded. Argument: the output directory."""
import sys

from pyflink.table import EnvironmentSettings, TableEnvironment

out = sys.argv[1]
t_env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
t_env.get_config().set("pipeline.name", "harvest-sql-filesystem")
t_env.execute_sql("""CREATE TABLE readings (sensor_id BIGINT, temperature DOUBLE)
  WITH ('connector' = 'datagen', 'number-of-rows' = '50', 'rows-per-second' = '1000')""")
t_env.execute_sql(f"""CREATE TABLE archive (sensor_id BIGINT, temperature DOUBLE)
  WITH ('connector' = 'filesystem', 'path' = '{out}', 'format' = 'json')""")
t_env.execute_sql("INSERT INTO archive SELECT sensor_id, temperature FROM readings")
