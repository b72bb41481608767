"""The child process of tests/integration/test_record_contract.py, run with the ingestion environment's
Python (it has pyflink): passes messages through ``KafkaReadings`` (java/, the jar of ``make jar``) on
PyFlink's gateway JVM. One JSON request a line on stdin (``contract``, ``max_bytes``, ``messages``), one
JSON answer a line on stdout: per message its ``reason`` (null: valid) and the ``record`` written."""

from __future__ import annotations

import json
import os
import sys


def _serve() -> None:
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
        validator = jvm.lakeflow.flink.KafkaReadings(request["contract"], request["max_bytes"])
        results = []
        for message in request["messages"]:
            try:
                results.append({"reason": None, "record": validator.record(message.encode())})
            except Py4JJavaError as exc:
                results.append({"reason": exc.java_exception.getMessage(), "record": None})
        answers.write(json.dumps({"results": results}) + "\n")
        answers.flush()


if __name__ == "__main__":
    _serve()
