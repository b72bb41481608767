"""The ``lake`` catalog the SQL jobs use, and the SQL Gateway stand-in sees (as a persistent
catalog would be seen): the same DDL for both."""

CATALOG = "lake"


def ddl(archive_path: str) -> list[str]:
    return [
        f"CREATE CATALOG {CATALOG} WITH ('type' = 'generic_in_memory')",
        f"CREATE DATABASE {CATALOG}.iot",
        f"""CREATE TABLE {CATALOG}.iot.readings (sensor_id BIGINT, temperature DOUBLE)
            WITH ('connector' = 'datagen', 'number-of-rows' = '50', 'rows-per-second' = '1000')""",
        f"""CREATE TABLE {CATALOG}.iot.archive (sensor_id BIGINT, temperature DOUBLE)
            WITH ('connector' = 'filesystem', 'path' = '{archive_path}', 'format' = 'json',
                  'source.monitor-interval' = '1 s')""",
        f"CREATE TABLE {CATALOG}.iot.console (sensor_id BIGINT, temperature DOUBLE) WITH ('connector' = 'print')",
    ]


def create(t_env, archive_path: str) -> None:
    for statement in ddl(archive_path):
        t_env.execute_sql(statement)
