"""The local Kafka broker as a real JVM (lakeflow/runtime/kafka.py): a restart keeps its topics and records
(``make soak`` restarts it under a running pipeline). The parts that need no JVM: tests/unit/test_kafka_broker.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.kafka_broker import run_kafka

pytestmark = pytest.mark.slow


def test_a_restarted_broker_keeps_its_topics_and_records(tmp_path: Path) -> None:
    with run_kafka(tmp_path / "kafka") as broker:
        broker.create_topic("kept", partitions=2)
        broker.produce("kept", [f'{{"n": {n}}}' for n in range(10)])
        before = broker.pid
        broker.restart(down_s=1.0)
        assert broker.pid not in (None, before)
        assert "kept" in broker.topics()
        offsets = broker._tool("org.apache.kafka.tools.GetOffsetShell", "--bootstrap-server", broker.bootstrap,
                               "--topic", "kept")
        assert sum(int(line.rsplit(":", 1)[1]) for line in offsets.split()) == 10
        broker.produce("kept", ['{"n": 10}'])                 # and takes new ones
    assert broker.pid is None
