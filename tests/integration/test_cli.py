"""The ``lakeflow`` parsers: docs/cli.md is generated from them and current; building them reads no
setting, so a bad value fails only the command that uses it, in one line naming the variable.

The unit tests (no process): tests/unit/test_cli.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.unit.test_cli import ROOT  # noqa: F401 (fixtures, constants)

LAKEFLOW = [sys.executable, "-m", "lakeflow.cli"]


def lakeflow(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*LAKEFLOW, *args], env={**os.environ, **env}, cwd=ROOT, capture_output=True, text=True,
                          timeout=120)


def test_a_bad_port_variable_fails_only_the_command_that_uses_it_in_one_line(tmp_path: Path) -> None:
    bad = {"SPARK_MASTER_PORT": "abc", "FLINK_REST_PORT": "80x", "LAKEFLOW_HOME": str(tmp_path)}
    query = lakeflow("query", "--local", **bad)  # no compacted table: query's own answer, exit 2
    assert query.returncode == 2, query.stderr
    assert "Traceback" not in query.stderr and "PORT" not in query.stderr
    assert "make compact" in query.stderr
    spark = lakeflow("spark", "up", **bad)
    assert spark.returncode == 2
    assert spark.stderr.splitlines() == [
        "lakeflow spark: invalid process settings: SPARK_MASTER_PORT='abc': expected a port number (0 to 65535)"
    ]
    printed = lakeflow("compact", "--print-command", **bad)  # its default master is $SPARK_MASTER_PORT's
    assert printed.returncode == 2 and printed.stderr.splitlines() == [
        "lakeflow compact: invalid process settings: SPARK_MASTER_PORT='abc': expected a port number (0 to 65535)"
    ]
    status = lakeflow("flink", "status", **bad)  # reads no port: not refused for FLINK_REST_PORT
    assert status.returncode == 1 and status.stdout.strip() == "not running", status.stderr
    assert lakeflow("spark", "up", "--help", **bad).returncode == 0
    for help_of in ((), ("compact",), ("flink", "up")):  # the root's and others' help read no setting either
        shown = lakeflow(*help_of, "--help", **bad)
        assert shown.returncode == 0 and shown.stdout.startswith(f"usage: {' '.join(['lakeflow', *help_of])} ")


def test_a_harvest_starts_without_what_it_does_not_use() -> None:
    """`lakeflow harvest` imports its own command's module alone (no compaction, no pyiceberg), and
    its HTTP (lakeflow.http.Pool, libcurl) neither requests nor urllib3: its start-up is the harvest's."""
    code = ("import sys\nfrom lakeflow.cli.main import main\n"
            "status = main(['harvest', '--rest-url', 'http://127.0.0.1:9', '--max-retries', '0', '--timeout', '2'])\n"
            "print(status, sorted({m.split('.')[0] for m in sys.modules} & {'requests', 'urllib3', 'pyiceberg'}),"
            " sorted(m for m in sys.modules if m.startswith(('lakeflow.compaction', 'lakeflow.cli.'))))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert "GET http://127.0.0.1:9/v1/config: ConnectionError" in proc.stderr  # it got as far as a request
    assert proc.stdout.split("\n")[0] == "2 [] ['lakeflow.cli.lineage', 'lakeflow.cli.main']"
