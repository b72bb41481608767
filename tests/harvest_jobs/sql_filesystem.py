"""SQL: datagen → filesystem (json), bounded. Argument: the archive directory."""
import sys

from pyflink.table import EnvironmentSettings, TableEnvironment

import lake_catalog

NAME = "harvest-sql-filesystem"


def submit(archive_path: str, name: str = NAME) -> None:
    t_env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    t_env.get_config().set("pipeline.name", name)
    lake_catalog.create(t_env, archive_path)
    t_env.execute_sql("INSERT INTO lake.iot.archive SELECT sensor_id, temperature FROM lake.iot.readings")


if __name__ == "__main__":
    submit(sys.argv[1])
