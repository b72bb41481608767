"""A real Apache Kafka broker for tests: :mod:`lakeflow.runtime.kafka` (Kafka 4.1.1 of the
verified ``kafka-broker`` jar set, one KRaft node on 127.0.0.1) on free ports.

- :func:`run_kafka` — a broker on free ports with its data under a folder, stopped at the end.
- fixture ``kafka_broker`` (session) — that broker; the tests using it fail, with the reason, when
  Java or the jars cannot be had.
- ``python -m tests.support.kafka_broker`` fetches (if missing) and lists Kafka's classpath.
"""

from __future__ import annotations

import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

from lakeflow.runtime import kafka
from lakeflow.runtime.kafka import KafkaBroker, KafkaUnavailable
from tests.support.fixtures_servers import free_port

__all__ = ["KafkaBroker", "kafka_broker", "run_kafka"]


@contextmanager
def run_kafka(work: Path, timeout: float = 60.0) -> Iterator[KafkaBroker]:
    with kafka.run_kafka(work, free_port(), free_port(), timeout) as broker:
        yield broker


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    """One Kafka 4.1.1 KRaft broker for the session (``kafka_broker.bootstrap``)."""
    kafka.kafka_jars()  # fails (never skips) the tests that need it when the jars cannot be had
    with run_kafka(tmp_path_factory.mktemp("kafka")) as broker:
        yield broker


def main() -> int:
    started = time.monotonic()
    try:
        jars = kafka.kafka_jars()
    except KafkaUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    size = sum(p.stat().st_size for p in jars)
    print(f"Kafka: {len(jars)} jars, {size / 1e6:.1f} MB in {jars[0].parent} ({time.monotonic() - started:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
