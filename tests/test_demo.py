"""A new user's first hour: ``lakeflow demo`` (``make demo``) end to end with real processes, Ctrl+C
stopping its cluster; the prerequisite checks the Makefile runs first; the compaction named by the
engine that ran it; every command saying what comes next."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from lakeflow import prereqs
from lakeflow.flink_cluster import FlinkCluster
from lakeflow.lineage.emit_json import document
from lakeflow.lineage.graph import build
from lakeflow.lineage.render import html_page
from lakeflow.lineage.spark import merge

ROOT = Path(__file__).resolve().parents[1]


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


# --- the demo, real processes ----------------------------------------------------------------

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
    assert out.count("│      400 │") == 5  # the query result printed: 400 readings per sensor

    page = home / "lineage.html"
    assert f"Lineage page: {page.resolve().as_uri()}" in out and "open it in a browser" in out
    html = page.read_text()
    assert "compaction job (arrow engine)" in html and "lakeflow-ingest iot.sensor-readings" in html
    assert any(home.joinpath("lineage").iterdir())
    assert "must-not-reach-the-demo" not in out + proc.stderr + "".join(
        p.read_text() for p in (home / "logs").iterdir())

    cluster = FlinkCluster(home / "cluster")
    assert not cluster.running()
    assert not daemons_of(cluster.conf_dir)
    assert "the Flink cluster is stopped" in out


@pytest.mark.slow
def test_ctrl_c_stops_the_demo_cluster(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "lakeflow.cli", "demo"], env=demo_env(tmp_path), cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    cluster = FlinkCluster(tmp_path / "demo" / "cluster")
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


# --- prerequisites -------------------------------------------------------------------------------

def test_python_outside_requires_python_is_named_with_what_to_install() -> None:
    assert prereqs.python_range() == ((3, 11), (3, 12))
    assert prereqs.python_problem((3, 11), "python3") is None
    for version in ((3, 10), (3, 12)):  # 3.10 has no typing.Self
        message = prereqs.python_problem(version, "/usr/bin/python3")
        assert message and "lakeflow needs Python 3.11; /usr/bin/python3 is 3.1" in message
        assert "make run PYTHON=python3.11" in message


def test_another_os_than_linux_is_refused_in_one_line() -> None:
    assert prereqs.os_problem("linux") is None
    message = prereqs.os_problem("darwin")
    assert message and "lakeflow needs Linux" in message and "/proc" in message and "darwin" in message
    assert "\n" not in message


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


# --- the compaction named by its engine ------------------------------------------------------

def _events(engine: str | None) -> list[dict]:
    base = {"job": {"namespace": "lakeflow", "name": "compact.iot.t"}, "inputs": [], "outputs": []}
    end = {**base, "eventType": "COMPLETE", "eventTime": "2026-11-23T00:00:01Z", "run": {"runId": "r1", "facets": {}}}
    if engine:
        end["run"]["facets"]["processing_engine"] = {"name": engine, "version": "1"}
    return [{**base, "eventType": "START", "eventTime": "2026-11-23T00:00:00Z", "run": {"runId": "r1"}}, end]


@pytest.mark.parametrize("engine", ["arrow", "spark"])
def test_lineage_names_the_engine_that_ran(engine: str) -> None:
    (run,) = merge(_events(engine))
    assert run.properties["engine"] == engine
    doc = document(build([], [run], vertex_granularity=False, rest_url=""))
    assert doc["flows"][0]["description"].startswith(f"compaction job ({engine} engine)")
    page = html_page(doc, "t")
    assert f"compaction job ({engine} engine)" in page and "Spark compaction" not in page


def test_events_without_the_engine_say_compaction_only() -> None:
    (run,) = merge(_events(None))
    assert "engine" not in run.properties
    doc = document(build([], [run], vertex_granularity=False, rest_url=""))
    assert doc["flows"][0]["description"].startswith("compaction job (from")


def test_compaction_events_carry_the_engine_and_lakeflow_as_integration() -> None:
    from lakeflow.compaction.lineage import INTEGRATION, engine_facet

    assert INTEGRATION == "LAKEFLOW"
    facet = engine_facet("arrow")
    assert facet is not None and facet.name == "arrow" and facet.version[0].isdigit()
    assert engine_facet("") is None


# --- what comes next -----------------------------------------------------------------------------

def test_every_step_names_the_next_commands() -> None:
    from lakeflow.compaction.report import next_steps as after_compact
    from lakeflow.lineage.commands import next_steps as after_harvest

    sys.path.insert(0, str(ROOT / "jobs"))
    try:
        import sensor_ingest
    finally:
        sys.path.remove(str(ROOT / "jobs"))
    assert "make compact" in sensor_ingest.next_steps(False) and "lakeflow query" in sensor_ingest.next_steps(False)
    assert "make harvest" in sensor_ingest.next_steps(True)
    assert "lakeflow query" in after_compact()[0] and "lineage view" in after_compact()[1]
    assert after_harvest("html", "x/l.html").startswith("Next: open file:///") and "browser" in after_harvest("html", "p")
    assert "lineage view --harvest h.json" in after_harvest("json", "h.json")


def test_make_package_prints_the_flink_run_command_from_the_settings(tmp_path: Path) -> None:
    """LAKEFLOW_HOME of .env.local places the cluster's conf dir, as for ``lakeflow flink up``."""
    env_file = tmp_path / "settings.env"
    env_file.write_text(f"LAKEFLOW_HOME={tmp_path / 'state'}\n")
    env = {k: v for k, v in os.environ.items() if k != "LAKEFLOW_HOME"}
    proc = subprocess.run([sys.executable, "-m", "lakeflow.ingest.submit"], capture_output=True, text=True,
                          env={**env, "LAKEFLOW_ENV_FILE": str(env_file)}, cwd=tmp_path, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert f"FLINK_CONF_DIR={tmp_path / 'state' / 'cluster' / 'conf'} " in proc.stdout
    command = shlex.split(proc.stdout)
    assert command[command.index("run"):] == ["run", "-pyarch", f"{ROOT / 'build' / 'ingestion-env.tar.gz'}#env",
                                              "-pyclientexec", "env/bin/python", "-pyexec", "env/bin/python",
                                              "-py", str(ROOT / "jobs" / "sensor_ingest.py")]
