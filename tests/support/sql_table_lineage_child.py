"""The child process of tests/integration/test_native_lineage.py, run with the ingestion environment's
Python (it has pyflink): names SQL tables with ``lakeflow.flink.SqlTableLineage`` (the listener's
naming) on PyFlink's gateway JVM, and gives the event files' permissions of ``lakeflow.lineage.file-mode``
values, and the event times it writes for instants (epoch milliseconds). ``{"tables": [{identifier, kind,
options}], "modes": [...], "times": [...]}`` on stdin; ``{"tables": [{connector, pattern, datasets}],
"modes": ["rw-r-----", ...], "times": ["1970-01-01T00:00:00.000Z", ...]}`` on stdout."""

from __future__ import annotations

import json
import os
import sys


def _serve() -> None:
    from pyflink.java_gateway import get_gateway
    from pyflink.util.java_utils import add_jars_to_context_class_loader

    from lakeflow.ingest.helpers_jar import jar_path

    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # whatever PyFlink prints goes to stderr, never into the answers
    add_jars_to_context_class_loader([jar_path().as_uri()])
    jvm = get_gateway().jvm
    request = json.load(sys.stdin)
    out = []
    for case in request["tables"]:
        options = jvm.java.util.HashMap()
        for key, value in case["options"].items():
            options.put(key, value)
        table = jvm.lakeflow.flink.SqlTableLineage(case["identifier"], case["kind"], options)
        out.append({"connector": table.connector(), "pattern": table.topicPattern(),
                    "datasets": [[d[0], d[1]] for d in table.datasets()]})
    permissions = jvm.java.nio.file.attribute.PosixFilePermissions
    modes = [permissions.toString(jvm.lakeflow.flink.OpenLineageListener.permissions(m)) for m in request["modes"]]
    listener, instant = jvm.lakeflow.flink.OpenLineageListener, jvm.java.time.Instant
    times = [listener.EVENT_TIME.format(instant.ofEpochMilli(ms)) for ms in request["times"]]
    answers.write(json.dumps({"tables": out, "modes": modes, "times": times}))
    answers.close()


if __name__ == "__main__":
    _serve()
