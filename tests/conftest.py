"""Shared pytest configuration. ``unit/``: no process started; ``integration/``: real processes (Flink,
Spark, moto, Kafka, PostgreSQL, the ``lakeflow`` command); ``standins/``: stand-ins of remote services;
``support/``: fixtures of each area (``fixtures_*.py``) and launchers of the real servers."""

import os

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

pytest_plugins = [
    "tests.support.fixtures_servers",
    "tests.support.fixtures_flink",
    "tests.support.fixtures_lakekeeper",
    "tests.support.fixtures_harvest",
    "tests.support.fixtures_sql_gateway",
    "tests.support.fixtures_compaction",
    "tests.standins.s3_expiry_proxy",
    "tests.support.iceberg_rest",
    "tests.support.lakehouse",
    "tests.support.fixtures_kafka",
    "tests.support.postgres_server",
    "tests.support.jvm_guard",
    "tests.support.disk_guard",
    "tests.support.own_home",
]
