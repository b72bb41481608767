"""Fixture ``kafka_broker`` (session): one real Kafka 4.1.1 KRaft broker (:mod:`tests.support.kafka_broker`);
the tests using it fail, with the reason, when Java or the jars cannot be had."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from lakeflow.runtime import kafka
from tests.support.kafka_broker import KafkaBroker, run_kafka


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    """One Kafka 4.1.1 KRaft broker for the session (``kafka_broker.bootstrap``)."""
    kafka.kafka_jars()  # fails (never skips) the tests that need it when the jars cannot be had
    with run_kafka(tmp_path_factory.mktemp("kafka")) as broker:
        yield broker
