"""A new user's first hour: ``lakeflow demo`` (``make demo``) end to end with real processes, Ctrl+C
stopping its cluster; the prerequisite checks the Makefile runs first; the compaction named by the
engine that ran it; every command saying what comes next.

The unit tests (no process): tests/unit/test_demo.py.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from lakeflow import prereqs
from lakeflow.lineage.datasets import from_location
from lakeflow.lineage.emit_json import document
from lakeflow.lineage.graph import build
from lakeflow.lineage.render import html_page
from lakeflow.lineage.stored_runs import merge
from lakeflow.runtime.flink_cluster import FlinkCluster
from lakeflow.secret import is_secret_key
from tests.support.lineage_page import page_nodes
from tests.unit.test_demo import _events  # noqa: F401 (fixtures, constants)

ROOT = Path(__file__).resolve().parents[2]


def demo_env(home: Path) -> dict[str, str]:
    return {**os.environ, "LAKEFLOW_HOME": str(home), "LAKEFLOW_ENV_FILE": os.devnull,
            "TOKEN": "must-not-reach-the-demo", "LAKEKEEPER": "http://127.0.0.1:9"}  # ignored by the demo


def daemons_of(conf_dir: Path) -> list[str]:
    """Processes on this machine whose command line names ``conf_dir`` (the cluster's JVMs, the
    ``flink run`` client): their command lines."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmdline = (proc / "cmdline").read_bytes().decode(errors="replace").replace("\0", " ")
            except OSError:
                continue
            if str(conf_dir) in cmdline:
                found.append(f"{proc.name}: {cmdline[:300]}")
    return found


@pytest.mark.slow
def test_demo_runs_the_whole_chain_and_stops_its_cluster(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "lakeflow.cli", "demo"], env=demo_env(tmp_path), cwd=tmp_path,
                          capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    home = tmp_path / "demo"
    out = proc.stdout
    for n in range(1, 6):
        assert f"[{n}/5]" in out
    assert out.count("done in") == 5

    raw = home / "warehouse" / "iot" / "sensor-readings"
    readings = [r for f in raw.rglob("part-*.json") for r in json.loads(f.read_text())]  # hour buckets or flat
    assert len(readings) == 2000 and len({r["seq"] for r in readings}) == 2000
    assert "2000 readings, " in out and raw.as_uri() in out

    counted = subprocess.run([sys.executable, "-m", "lakeflow.cli", "query", "--format", "json",
                              "SELECT count(*) AS n, count(DISTINCT sensor_id) AS sensors FROM readings"],
                             env={**demo_env(home), "LAKEKEEPER": ""}, cwd=tmp_path, capture_output=True, text=True,
                             timeout=120)
    assert counted.returncode == 0, counted.stderr
    assert json.loads(counted.stdout) == [{"n": 2000, "sensors": 5}]
    assert len(re.findall(r"│ sensor-00\d │ +400 │", out)) == 5  # the query result printed: 400 records per sensor

    page = home / "lineage.html"
    assert f"Lineage page: {page.resolve().as_uri()}" in out and "open it in a browser" in out
    html = page.read_text()
    assert "compaction job (arrow engine)" in html and "lakeflow-ingest iot.sensor-readings" in html
    assert any(home.joinpath("lineage").iterdir())
    assert "must-not-reach-the-demo" not in out + proc.stderr + "".join(
        p.read_text() for p in (home / "logs").iterdir())

    cluster = FlinkCluster(home / "cluster", secret_variable=is_secret_key)
    assert not cluster.running()
    assert not daemons_of(cluster.conf_dir)
    assert "the Flink cluster is stopped" in out


@pytest.mark.slow
def test_demo_from_a_kafka_topic_shows_topic_raw_table_iceberg(tmp_path: Path) -> None:
    """``lakeflow demo --source kafka`` (``make demo SOURCE=kafka``): its own broker and producer
    first, the job reads the topic to its end; the page draws topic → raw table → Iceberg; the
    broker and the cluster are stopped."""
    subprocess.run(["make", "-s", "package"], cwd=ROOT, check=True, capture_output=True, timeout=300)
    proc = subprocess.run([sys.executable, "-m", "lakeflow.cli", "demo", "--source", "kafka", "--records", "600"],
                          env=demo_env(tmp_path), cwd=tmp_path, capture_output=True, text=True, timeout=500)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    home, out = tmp_path / "demo", proc.stdout
    assert [line[:5] for line in out.splitlines() if re.match(r"\[\d/7\]", line)] == [f"[{n}/7]" for n in range(1, 8)]
    assert out.count("done in") == 7
    assert "[2/7] produce 600 synthetic readings to the topic" in out
    topic = re.search(r"^  Kafka topic +(kafka://127\.0\.0\.1:\d+/sensor-readings) ", out, re.MULTILINE)
    assert topic is not None, out

    raw = home / "warehouse" / "iot" / "sensor-readings"
    readings = [r for f in raw.rglob("part-*.json") if "_dead_letters" not in f.parts for r in json.loads(f.read_text())]
    assert sorted(r["seq"] for r in readings) == list(range(600)) and len({r["run_id"] for r in readings}) == 1
    assert "600 readings, " in out and not list(raw.glob("_dead_letters/**/part-*"))
    assert len(re.findall(r"│ sensor-00\d │ +120 │", out)) == 5  # the query: 120 records per sensor

    nodes = page_nodes((home / "lineage.html").read_text())
    flink, raw_node = "flink:lakeflow-ingest iot.sensor-readings", nodes[str(from_location(raw.as_uri()))]
    assert nodes[topic.group(1)]["Read by"] == [flink]
    assert raw_node["Written by"] == [flink]
    (compactor,) = raw_node["Read by"]
    (iceberg,) = [name for name, d in nodes.items() if d.get("Written by") == [compactor]]
    assert iceberg.startswith(f"file://{home / 'iceberg'}/")
    assert "must-not-reach-the-demo" not in out + proc.stderr

    assert not daemons_of(home / "kafka") and not daemons_of(home / "cluster")
    assert "the Flink cluster and the Kafka broker are stopped" in out


@pytest.mark.slow
def test_ctrl_c_stops_the_demo_cluster(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "lakeflow.cli", "demo"], env=demo_env(tmp_path), cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    cluster = FlinkCluster(tmp_path / "demo" / "cluster", secret_variable=is_secret_key)
    try:
        assert proc.stdout is not None
        for line in proc.stdout:  # step 2 starts once the cluster is up
            if line.startswith("[2/5]"):
                break
        else:
            pytest.fail(f"the demo ended before its cluster was up: {proc.stderr.read() if proc.stderr else ''}")
        assert cluster.running()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
        cluster.stop()
    assert proc.returncode == 130, err[-2000:]
    assert "interrupted: stopping the demo's Flink cluster" in err
    assert not cluster.running()
    assert not daemons_of(cluster.conf_dir)
    assert not daemons_of(tmp_path / "demo")  # nor anything else of the demo (flink run's Python client)


def fake_javac(tmp_path: Path, says: str) -> str:
    script = tmp_path / "javac"
    script.write_text(f"#!/bin/sh\necho '{says}' >&2\n")
    script.chmod(0o755)
    return str(script)


def test_jdk_is_checked_by_javac_and_its_version(tmp_path: Path) -> None:
    assert prereqs.jdk_problem(fake_javac(tmp_path, "javac 17.0.15")) is None
    old = prereqs.jdk_problem(fake_javac(tmp_path, "javac 1.8.0_292"))
    assert old and "Java 8" in old and "openjdk-17-jdk" in old


def test_prerequisite_script_exits_non_zero_with_one_line_per_problem(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, str(ROOT / "lakeflow" / "prereqs.py")], capture_output=True, text=True,
                          env={**os.environ, "PATH": str(tmp_path)}, timeout=60)  # no javac on PATH
    assert proc.returncode == 1
    assert all(line.startswith("prerequisite missing: ") for line in proc.stderr.splitlines())
    assert "javac is not on PATH" in proc.stderr


@pytest.mark.parametrize("engine", ["arrow", "spark"])
def test_lineage_names_the_engine_that_ran(engine: str) -> None:
    (run,) = merge(_events(engine))
    assert run.properties["engine"] == engine
    doc = document(build([], [run], vertex_granularity=False, rest_url=""))
    assert doc["flows"][0]["description"].startswith(f"compaction job ({engine} engine)")
    page = html_page(doc, "t")
    assert f"compaction job ({engine} engine)" in page and "Spark compaction" not in page


def test_make_package_prints_the_flink_run_command_from_the_settings(tmp_path: Path) -> None:
    """LAKEFLOW_HOME of .env.local places the cluster's conf dir, as for ``lakeflow flink up``."""
    env_file = tmp_path / "settings.env"
    env_file.write_text(f"LAKEFLOW_HOME={tmp_path / 'state'}\n")
    env = {k: v for k, v in os.environ.items() if k != "LAKEFLOW_HOME"}
    proc = subprocess.run([sys.executable, "-m", "lakeflow.cli", "flink-command"], capture_output=True, text=True,
                          env={**env, "LAKEFLOW_ENV_FILE": str(env_file)}, cwd=tmp_path, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert f"FLINK_CONF_DIR={tmp_path / 'state' / 'cluster' / 'conf'} " in proc.stdout
    command = shlex.split(proc.stdout)
    assert command[command.index("run"):] == ["run", "-pyarch", f"{ROOT / 'build' / 'ingestion-env.tar.gz'}#env",
                                              "-pyclientexec", "env/bin/python", "-pyexec", "env/bin/python",
                                              "-py", str(ROOT / "jobs" / "sensor_ingest.py")]
