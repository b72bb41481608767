"""Real servers on 127.0.0.1 shared by the whole suite: moto (S3 + STS), free ports."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest
import requests

from lakeflow.runtime.ports import free_ports


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    return free_ports(1)[0]


def wait_http(url: str, timeout: float = 30.0) -> None:
    """Wait until ``url`` answers any HTTP status."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            requests.get(url, timeout=1)
            return
        except requests.RequestException:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{url} did not answer within {timeout}s")
            time.sleep(0.1)


@dataclass(frozen=True)
class MotoServer:
    """A running ``moto_server``: S3 and STS at ``url``; bootstrap credentials are any."""

    url: str
    region: str = "us-east-1"

    def client(self, service: str, **kwargs):
        import boto3

        kwargs.setdefault("aws_access_key_id", "bootstrap")
        kwargs.setdefault("aws_secret_access_key", "bootstrap")
        return boto3.client(service, endpoint_url=self.url, region_name=self.region, **kwargs)

    def reset(self) -> None:
        requests.post(f"{self.url}/moto-api/reset", timeout=10)


@contextmanager
def run_moto(log_dir: Path, *, strict_bootstrap_calls: int = 0) -> Iterator[MotoServer]:
    """moto's S3 + STS server on a free 127.0.0.1 port; with ``strict_bootstrap_calls`` N, the
    first N calls are unauthenticated (bootstrap) and signatures and keys are enforced after
    (as AWS checks them: see tests/standins/moto_server.py)."""
    if importlib.util.find_spec("moto.server") is None:
        raise RuntimeError("moto's server not found: install the test extras (pip install -e '.[test]')")
    port = free_port()
    env = {**os.environ, "AWS_DEFAULT_REGION": "us-east-1"}
    if strict_bootstrap_calls:
        env["INITIAL_NO_AUTH_ACTION_COUNT"] = str(strict_bootstrap_calls)
    log_dir.mkdir(parents=True, exist_ok=True)
    with open(log_dir / f"moto-{port}.log", "wb") as out:
        proc = subprocess.Popen([sys.executable, str(Path(__file__).parents[1] / "standins" / "moto_server.py"), "-H", "127.0.0.1", "-p", str(port)], stdout=out,
                                stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(f"{url}/moto-api/", timeout=30)
        yield MotoServer(url)
    finally:
        stop_process(proc)


def stop_process(proc: subprocess.Popen, grace_s: float = 10) -> None:
    """SIGTERM a server process, SIGKILL it after ``grace_s``; wait for it either way."""
    proc.terminate()
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="session")
def moto_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MotoServer]:
    """moto's real HTTP server (S3 + STS) on a free 127.0.0.1 port, for the whole session."""
    with run_moto(tmp_path_factory.mktemp("moto")) as server:
        yield server
