"""The child process of tests/integration/test_ingest_writer.py, run with the ingestion environment's Python
(it has pyflink): drives the JSON-array bulk writer on PyFlink's gateway JVM, one JSON request a
line on stdin, one JSON answer a line on stdout."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def _serve() -> None:
    """The child: writes each requested part file as FileSink drives the writer: create on a
    stream, addElement…, flush, finish."""
    from py4j.protocol import Py4JJavaError
    from pyflink.java_gateway import get_gateway
    from pyflink.util.java_utils import add_jars_to_context_class_loader

    from lakeflow.ingest.helpers_jar import jar_path

    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # whatever PyFlink prints goes to stderr, never into the answers
    add_jars_to_context_class_loader([jar_path().as_uri()])
    jvm = get_gateway().jvm
    for line in sys.stdin:
        request = json.loads(line)
        path = Path(request["path"])
        answer = {"error": None, "error_type": None, "flushed_head": None}
        stream = jvm.org.apache.flink.core.fs.local.LocalDataOutputStream(jvm.java.io.File(str(path)))
        try:
            writer = jvm.lakeflow.flink.JsonArrayWriterFactory().create(stream)
            for i, element in enumerate(request["elements"]):
                row = jvm.org.apache.flink.types.Row.withPositions(1)
                row.setField(0, element)
                writer.addElement(row)
                if i == request["flush_after"]:
                    writer.flush()
                    answer["flushed_head"] = path.read_bytes()[:1].decode()
            writer.finish()
        except Py4JJavaError as exc:
            answer.update(error=str(exc), error_type=type(exc).__name__)
        finally:
            stream.close()
        answers.write(json.dumps(answer) + "\n")
        answers.flush()


if __name__ == "__main__":
    _serve()
