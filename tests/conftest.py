"""Shared pytest configuration. Fixtures of each area live in their own ``fixtures_*.py``."""

import os

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

pytest_plugins = [
    "tests.fixtures_servers",
    "tests.fixtures_flink",
    "tests.fixtures_lakekeeper",
    "tests.fixtures_harvest",
    "tests.fixtures_sql_gateway",
    "tests.fixtures_compaction",
    "tests.s3_expiry_proxy",
    "tests.iceberg_rest",
    "tests.lakehouse",
    "tests.kafka_broker",
    "tests.postgres_server",
    "tests.jvm_guard",
]
