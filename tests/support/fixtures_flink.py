"""A real standalone Flink cluster from the apache-flink wheel, shared by the session."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterator

import pytest

from lakeflow.runtime.flink_cluster import FlinkCluster
from lakeflow.secret import is_secret_key
from tests.support.fixtures_servers import free_port

ROOT = Path(__file__).resolve().parents[2]


def packaged_job_args(*job_args: str) -> list[str]:
    """The documented ``flink run`` arguments for the packaged ingestion job (``make package``): its
    environment shipped as ``-pyarch build/ingestion-env.tar.gz``, lakeflow inside."""
    from lakeflow.ingest.submit import packaged_flink_run_command

    return [*packaged_flink_run_command()[1:], *job_args]


@pytest.fixture(scope="session")
def flink_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FlinkCluster]:
    """JobManager + TaskManager (2 slots) on free localhost ports; stopped at session end."""
    cluster = FlinkCluster(tmp_path_factory.mktemp("flink-cluster"), rest_port=free_port(),
                           rpc_port=free_port(), secret_variable=is_secret_key)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def make_flink_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., FlinkCluster]]:
    """Factory for more clusters, each on free ports and stopped at teardown:
    ``make_flink_cluster(conf=storage.conf, env=storage.env())`` starts one holding a table's
    storage settings (:func:`lakeflow.ingest.storage.cluster_storage`, as ``lakeflow flink up``)."""
    started: list[FlinkCluster] = []

    def make(**kwargs) -> FlinkCluster:
        cluster = FlinkCluster(tmp_path_factory.mktemp("flink-cluster"), rest_port=free_port(),
                               rpc_port=free_port(), **kwargs, secret_variable=is_secret_key)
        started.append(cluster)
        cluster.start()
        return cluster

    yield make
    for cluster in started:
        cluster.stop()
