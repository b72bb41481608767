"""Fixtures of the lineage harvester: the Flink REST stub, the SQL Gateway stand-in (recorded
or backed by a real TableEnvironment), the recorded cluster, and the real-cluster scenario."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

import pytest

from tests.standins.flink_rest import FlinkRestStub
from tests.support.harvest_scenario import GATEWAY_RECORDING, RECORDING, Scenario, cancel_running, submit
from tests.standins.sql_gateway import RecordedExecutor, SqlGatewayStandIn


@pytest.fixture
def flink_rest_stub() -> Iterator[FlinkRestStub]:
    """An empty JobManager stub on a free 127.0.0.1 port; add routes with ``.route()``."""
    stub = FlinkRestStub().start()
    try:
        yield stub
    finally:
        stub.stop()


@pytest.fixture
def recorded_jobmanager(flink_rest_stub: FlinkRestStub) -> FlinkRestStub:
    """The stub replaying the answers recorded from the real cluster scenario."""
    flink_rest_stub.load_recording(RECORDING)
    return flink_rest_stub


@pytest.fixture(scope="session")
def recorded_scenario() -> dict:
    """What the recording was made of: archive path, declared location, job ids by name."""
    return json.loads((RECORDING / "scenario.json").read_text())


@pytest.fixture
def recorded_gateway() -> Iterator[SqlGatewayStandIn]:
    """A SQL Gateway stand-in replaying the answers real Flink gave for the ``lake`` catalog."""
    standin = SqlGatewayStandIn(RecordedExecutor.load(GATEWAY_RECORDING)).start()
    try:
        yield standin
    finally:
        standin.stop()


@pytest.fixture(scope="module")
def harvest_scenario(flink_cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenario]:
    """The harvest test jobs, submitted once to the session's real cluster and settled."""
    scenario = submit(flink_cluster, Path(tmp_path_factory.mktemp("harvest-scenario")))
    try:
        yield scenario
    finally:
        cancel_running(flink_cluster.rest_url, scenario.job_ids)
