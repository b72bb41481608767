"""The JSON-array bulk writer (java/lakeflow/flink/JsonArrayWriterFactory.java) on a real JVM,
driven like FileSink drives it: create on a stream, addElement…, flush, finish."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from lakeflow.ingest.progress import records_in
from tests.support.envs import INGEST_PY

pytestmark = pytest.mark.slow  # starts a JVM (PyFlink's gateway)
ROOT = Path(__file__).resolve().parents[2]


class WriterRefused(Exception):
    """The writer threw (py4j's Py4JJavaError in the child): the Java message."""


@pytest.fixture(scope="module")
def jvm(tmp_path_factory: pytest.TempPathFactory):
    """A child of the ingestion environment (this run's has no pyflink) driving the writer on
    PyFlink's gateway JVM: one JSON request a line (tests/support/json_array_writer_child.py)."""
    env = {**os.environ, "FLINK_LOG_DIR": str(tmp_path_factory.mktemp("flink-log"))}
    child = subprocess.Popen([INGEST_PY, "-m", "tests.support.json_array_writer_child"], cwd=ROOT, env=env, text=True,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    yield child
    child.stdin.close()
    assert child.wait(timeout=60) == 0


def write(jvm, path: Path, elements: list, flush_after: int = -1) -> bytes:
    """Write ``elements`` (field 0 of each Row) as one part file; return its bytes."""
    jvm.stdin.write(json.dumps({"path": str(path), "elements": elements, "flush_after": flush_after}) + "\n")
    jvm.stdin.flush()
    answer = json.loads(jvm.stdout.readline())
    if answer["error"] is not None:
        assert answer["error_type"] == "Py4JJavaError"
        raise WriterRefused(answer["error"])
    if flush_after >= 0:
        assert answer["flushed_head"] == "["  # flush hands the bytes to the stream
    return path.read_bytes()


def test_a_writer_finished_without_elements_writes_an_empty_array(jvm, tmp_path: Path) -> None:
    data = write(jvm, tmp_path / "p.json", [])
    assert data == b"[]" and json.loads(data) == [] and records_in(data) == 0


def test_one_element(jvm, tmp_path: Path) -> None:
    data = write(jvm, tmp_path / "p.json", ['{"seq":0}'])
    assert data == b'[{"seq":0}]\n' and records_in(data) == 1


def test_many_elements_larger_than_the_buffer_keep_their_order(jvm, tmp_path: Path) -> None:
    big = json.dumps({"seq": -1, "pad": "x" * 200_000})  # one element larger than the 64 KiB buffer
    elements = [json.dumps({"seq": i, "pad": "y" * (i % 300)}) for i in range(2_000)]
    elements.insert(1000, big)
    data = write(jvm, tmp_path / "p.json", elements, flush_after=10)
    parsed = json.loads(data)
    assert [r["seq"] for r in parsed] == [*range(1000), -1, *range(1000, 2000)]
    assert records_in(data) == len(elements) == 2_001


def test_text_is_written_as_utf8(jvm, tmp_path: Path) -> None:
    data = write(jvm, tmp_path / "p.json", ['{"location":"Zürich – 東京"}'])
    assert json.loads(data.decode("utf-8")) == [{"location": "Zürich – 東京"}]


def test_a_null_document_is_refused_with_its_position(jvm, tmp_path: Path) -> None:
    with pytest.raises(WriterRefused, match="field 0 of row 1 is null"):
        write(jvm, tmp_path / "p.json", ['{"seq":0}', None])

