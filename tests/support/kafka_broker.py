"""A real Apache Kafka broker for tests: :mod:`lakeflow.runtime.kafka` (Kafka 4.1.1 of the
verified ``kafka-broker`` jar set, one KRaft node on 127.0.0.1) on free ports.

- :func:`run_kafka` — a broker on free ports with its data under a folder, stopped at the end.
- the ``kafka_broker`` fixture is in :mod:`tests.support.fixtures_kafka` (this module imports no
  pytest: the benchmarks use it from the ingestion environment, which has none).
- ``python -m tests.support.kafka_broker`` fetches (if missing) and lists Kafka's classpath.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from lakeflow.runtime import kafka
from lakeflow.runtime.kafka import KafkaBroker, KafkaUnavailable
from lakeflow.runtime.ports import free_ports

__all__ = ["KafkaBroker", "run_kafka"]


@contextmanager
def run_kafka(work: Path, timeout: float = 60.0) -> Iterator[KafkaBroker]:
    with kafka.run_kafka(work, *free_ports(2), timeout) as broker:
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
