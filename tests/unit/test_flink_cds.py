"""The local Flink job's JVM options (lakeflow.ingest.client_jvm): the class archive only when there is one,
the caller's JVM_ARGS win, nothing under ``flink run``. No process is started.

The real-process test: tests/integration/test_flink_cds.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakeflow.ingest import client_jvm
from lakeflow.runtime import class_archive


@pytest.fixture
def archive(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Where the archive is looked for: the test's folder (this environment has no pyflink: where it really
    is is the real-process test's); no JVM_ARGS from the caller."""
    path = tmp_path / "cds" / "flink-x-java-y.jsa"
    monkeypatch.setattr(class_archive, "flink_archive_path", lambda: path)
    for name in ("JVM_ARGS", "PYFLINK_GATEWAY_PORT", client_jvm.PYFLINK_WORKER_MODE):
        monkeypatch.delenv(name, raising=False)
    return path


def test_the_archive_is_mapped_only_when_there_is_one(archive: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    client_jvm.configure()
    assert "JVM_ARGS" not in os.environ and os.environ[client_jvm.PYFLINK_WORKER_MODE] == "process"
    archive.parent.mkdir(parents=True)
    archive.write_bytes(b"")
    client_jvm.configure()
    assert os.environ["JVM_ARGS"] == f"-XX:SharedArchiveFile={archive} {class_archive.QUIET}"
    monkeypatch.setenv("JVM_ARGS", "-Xmx1g")  # the caller's own
    client_jvm.configure()
    assert os.environ["JVM_ARGS"] == "-Xmx1g"


def test_nothing_under_flink_run(archive: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    archive.parent.mkdir(parents=True)
    archive.write_bytes(b"")
    monkeypatch.setenv("PYFLINK_GATEWAY_PORT", "12345")  # the CLI's JVM is the gateway
    client_jvm.configure()
    assert "JVM_ARGS" not in os.environ and client_jvm.PYFLINK_WORKER_MODE not in os.environ
