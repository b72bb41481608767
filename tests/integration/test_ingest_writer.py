"""The JSON-array bulk writer (java/lakeflow/flink/JsonArrayWriterFactory.java) on a real JVM,
driven like FileSink drives it: create on a stream, addElement…, flush, finish."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from lakeflow.ingest.progress import records_in
from lakeflow.ingest.sink import jar_path

pytestmark = pytest.mark.slow  # starts a JVM (PyFlink's gateway)


@pytest.fixture(scope="module")
def jvm(tmp_path_factory: pytest.TempPathFactory):
    os.environ.setdefault("FLINK_LOG_DIR", str(tmp_path_factory.mktemp("flink-log")))
    from pyflink.java_gateway import get_gateway
    from pyflink.util.java_utils import add_jars_to_context_class_loader

    add_jars_to_context_class_loader([jar_path().as_uri()])
    return get_gateway().jvm


def write(jvm, path: Path, elements: list, flush_after: int = -1) -> bytes:
    """Write ``elements`` (field 0 of each Row) as one part file; return its bytes."""
    stream = jvm.org.apache.flink.core.fs.local.LocalDataOutputStream(jvm.java.io.File(str(path)))
    writer = jvm.lakeflow.flink.JsonArrayWriterFactory().create(stream)
    for i, element in enumerate(elements):
        row = jvm.org.apache.flink.types.Row.withPositions(1)
        row.setField(0, element)
        writer.addElement(row)
        if i == flush_after:
            writer.flush()
            assert path.read_bytes().startswith(b"[")  # flush hands the bytes to the stream
    writer.finish()
    stream.close()
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
    from py4j.protocol import Py4JJavaError

    with pytest.raises(Py4JJavaError, match="field 0 of row 1 is null"):
        write(jvm, tmp_path / "p.json", ['{"seq":0}', None])
