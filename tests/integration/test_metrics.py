"""Operable: the compactor's metrics scraped by a real Prometheus (Debian's ``prometheus``, started
here on 127.0.0.1 with a generated config and lakeflow's alert rules loaded), a single run pushed to a
real Pushgateway (``prometheus-pushgateway``) or written as a node_exporter textfile, and every
alert rule in deploy/prometheus/ checked by ``promtool test rules`` (a firing and a quiet case each).

The unit tests (no process): tests/unit/test_metrics.py.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.support.fixtures_compaction import (
    REPO,
    LakeflowHome,
    json_array,
    make_home,
    readings,
    write_in_progress,
    write_parts,
)
from tests.support.fixtures_servers import free_port, stop_process, wait_http
from tests.unit.test_metrics import DASHBOARD, RULE_TESTS, RULES, TABLE, dashboard_queries  # noqa: F401 (fixtures, constants)

LAKEFLOW = Path(sys.executable).parent / "lakeflow"


DAY_MS = 1763683200000  # 2025-11-21T00:00:00Z


HOUR = "2025-11-21--00"


# the only labels a lakeflow metric may carry: Prometheus' own, the Iceberg table's name and fixed sets
# of values (never a location, URL or credential)
ALLOWED_LABELS = {"__name__", "instance", "job", "table", "result", "kind", "le"}


def tool(name: str) -> str:
    path = shutil.which(name)
    assert path, f"{name} not found: make test installs Debian's prometheus and prometheus-pushgateway (build-support/test-prereqs.sh)"
    return path


def test_alert_rules_pass_promtool() -> None:
    checked = subprocess.run([tool("promtool"), "check", "rules", str(RULES)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = subprocess.run([tool("promtool"), "test", "rules", RULE_TESTS.name], cwd=RULE_TESTS.parent,
                            capture_output=True, text=True)
    assert tested.returncode == 0, tested.stdout + tested.stderr


@dataclass
class Prometheus:
    """A Prometheus server on 127.0.0.1: scrape targets set by :meth:`scrape` (config reloaded)."""

    url: str
    config: Path

    def scrape(self, jobs: dict[str, list[str]], honor_labels: bool = False) -> None:
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(RULES)],
            "scrape_configs": [
                {"job_name": job, "honor_labels": honor_labels, "static_configs": [{"targets": targets}]}
                for job, targets in jobs.items()
            ],
        }
        self.config.write_text(yaml.safe_dump(config))
        requests.post(f"{self.url}/-/reload", timeout=10).raise_for_status()

    def query(self, expr: str) -> list[dict]:
        answer = requests.get(f"{self.url}/api/v1/query", params={"query": expr}, timeout=10).json()
        assert answer["status"] == "success", answer
        return answer["data"]["result"]

    def value(self, expr: str) -> float | None:
        result = self.query(expr)
        return float(result[0]["value"][1]) if result else None

    def wait(self, expr: str, until: Callable[[float | None], bool], timeout: float = 90) -> float | None:
        deadline = time.monotonic() + timeout
        while True:
            value = self.value(expr)
            if until(value):
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"{expr} = {value} after {timeout} s")
            time.sleep(0.5)

    def firing(self) -> set[str]:
        alerts = requests.get(f"{self.url}/api/v1/alerts", timeout=10).json()["data"]["alerts"]
        return {a["labels"]["alertname"] for a in alerts if a["state"] == "firing"}


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prometheus]:
    work = tmp_path_factory.mktemp("prometheus")
    config = work / "prometheus.yml"
    config.write_text(yaml.safe_dump({"global": {"scrape_interval": "1s"}, "rule_files": [str(RULES)]}))
    port = free_port()
    with open(work / "prometheus.log", "wb") as log:
        proc = subprocess.Popen([tool("prometheus"), f"--config.file={config}", f"--storage.tsdb.path={work / 'data'}",
                                 f"--web.listen-address=127.0.0.1:{port}", "--web.enable-lifecycle"],
                                stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_http(f"http://127.0.0.1:{port}/-/ready", timeout=60)
        yield Prometheus(f"http://127.0.0.1:{port}", config)
    finally:
        stop_process(proc)


def _parts(home: LakeflowHome, run: str, count: int, start_ms: int) -> None:
    write_parts(home.raw / HOUR, readings(run, count, start_ms=start_ms, seed=count), 10)


@pytest.mark.slow
def test_prometheus_scrapes_the_compactor(prometheus: Prometheus, tmp_path: Path) -> None:
    home = make_home(tmp_path)
    _parts(home, "run-1", 40, DAY_MS)
    crashed = write_in_progress(home.raw / HOUR, readings("run-0", 5, start_ms=DAY_MS))  # a killed writer's
    os.utime(crashed, (time.time() - 2 * 86400,) * 2)
    port = free_port()
    proc = subprocess.Popen([str(LAKEFLOW), "compact", "--engine", "arrow", "--every", "2s", "--metrics-port", str(port),
                             "--maintain-every", "1h"],
                            env=home.env, cwd=home.home, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_http(f"http://127.0.0.1:{port}/metrics", timeout=60)
        prometheus.scrape({"lakeflow-compact": [f"127.0.0.1:{port}"]})
        up = 'up{job="lakeflow-compact"}'
        prometheus.wait(up, lambda v: v == 1)
        rows = f'lakeflow_compaction_rows_out_total{{job="lakeflow-compact",table="{TABLE}"}}'
        assert prometheus.wait(rows, lambda v: v == 40) == 40
        assert prometheus.value('lakeflow_table_snapshots{job="lakeflow-compact"}') == 1
        removed = 'lakeflow_maintenance_removed_total{job="lakeflow-compact",kind="in_progress_removed"}'
        assert prometheus.value(removed) == 1 and not crashed.exists()   # the first run maintained

        _parts(home, "run-2", 60, DAY_MS + 600_000)                    # more readings flow in
        (home.raw / HOUR / "part-bad-0-0.json").write_text(json_array(readings("run-3", 3, start_ms=DAY_MS))[:-20])
        assert prometheus.wait(rows, lambda v: v == 100) == 100
        assert prometheus.wait('lakeflow_table_snapshots{job="lakeflow-compact"}', lambda v: v == 2) == 2
        assert prometheus.value('lakeflow_compaction_rows_in_total{job="lakeflow-compact"}') == 100
        assert prometheus.value('lakeflow_compaction_files_compacted_total{job="lakeflow-compact"}') == 10
        assert prometheus.value('lakeflow_compaction_files_quarantined_total{job="lakeflow-compact"}') == 1
        assert prometheus.value('lakeflow_table_data_files{job="lakeflow-compact"}') == 2
        assert prometheus.value('lakeflow_compaction_freshness_lag_seconds{job="lakeflow-compact"}') == 0
        assert prometheus.value('lakeflow_compaction_runs_total{job="lakeflow-compact",result="ok"}') >= 2
        assert prometheus.value('lakeflow_compaction_runs_total{job="lakeflow-compact",result="error"}') == 0
        assert prometheus.value('lakeflow_compaction_run_duration_seconds_count{job="lakeflow-compact"}') >= 2
        # the real Prometheus evaluates lakeflow's rules on these series: a quarantined file alerts
        deadline = time.monotonic() + 60
        while "LakeflowQuarantinedFiles" not in prometheus.firing():
            assert time.monotonic() < deadline, prometheus.firing()
            time.sleep(1)
        assert "LakeflowCompactionFailing" not in prometheus.firing()

        series = prometheus.query('{__name__=~"lakeflow_.*", job="lakeflow-compact"}')
        assert len(series) >= 15
        assert {label for s in series for label in s["metric"]} <= ALLOWED_LABELS
        assert {s["metric"].get("table") for s in series} == {TABLE, None}        # None: running, the process's
        exposed = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
        assert str(home.home) not in exposed and "file://" not in exposed   # no location in a metric
        for expr in dashboard_queries():                 # the dashboard's queries parse and run (All tables)
            prometheus.query(expr.replace("$table", ".*"))
        used = {m for expr in dashboard_queries() for m in re.findall(r"\b(lakeflow_\w+)", expr)}
        scraped = {s["metric"]["__name__"] for s in series}
        assert used <= scraped | {f"{m}_bucket" for m in scraped}, used - scraped
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert f"metrics on port {port}" in out
    with pytest.raises(requests.ConnectionError):
        requests.get(f"http://127.0.0.1:{port}/metrics", timeout=5)   # the port closes with the service


def test_single_run_writes_a_textfile(tmp_path: Path) -> None:
    home = make_home(tmp_path)
    _parts(home, "run-1", 40, DAY_MS)
    textfile = tmp_path / "textfile" / "lakeflow.prom"
    done = subprocess.run([str(LAKEFLOW), "compact", "--engine", "arrow", "--metrics-textfile", str(textfile)],
                          env=home.env, cwd=home.home, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    samples = _samples(textfile)
    assert samples[("lakeflow_compaction_rows_out_total", TABLE, "")] == 40
    assert samples[("lakeflow_compaction_runs_total", TABLE, "ok")] == 1
    assert samples[("lakeflow_table_snapshots", TABLE, "")] == 1
    assert samples[("lakeflow_compaction_last_success_timestamp_seconds", TABLE, "")] > time.time() - 120


def test_a_pass_over_a_pipeline_exports_every_table_at_once(tmp_path: Path) -> None:
    """``lakeflow compact`` over a pipeline of two streams: one textfile with both tables' figures, the
    stream whose raw table is not registered failing alone (its error counted under its table)."""
    home = make_home(tmp_path)                                   # registers the raw table iot.sensor-readings
    _parts(home, "run-1", 40, DAY_MS)
    schema = REPO / "lakeflow" / "schema" / "sensor-reading.schema.json"
    (tmp_path / "pipeline.toml").write_text(
        '[defaults]\nnamespace = "iot"\n'
        + "".join(f'\n[[streams]]\nname = "{name}"\nschema = "{schema}"\ntable = "{table}"\n'
                  for name, table in (("sensors", "sensor-readings"), ("spare", "spare-readings"))))
    env = {k: v for k, v in home.env.items() if k != "TABLE"} | {"PIPELINE": str(tmp_path / "pipeline.toml")}
    textfile = tmp_path / "textfile" / "lakeflow.prom"
    done = subprocess.run([str(LAKEFLOW), "compact", "--engine", "arrow", "--metrics-textfile", str(textfile)],
                          env=env, cwd=home.home, capture_output=True, text=True, timeout=180)
    assert done.returncode == 2, done.stderr
    spare = "iot.spare-readings-compacted"
    samples = _samples(textfile)
    assert samples[("lakeflow_compaction_rows_out_total", TABLE, "")] == 40
    assert samples[("lakeflow_compaction_runs_total", TABLE, "ok")] == 1
    assert samples[("lakeflow_compaction_runs_total", spare, "error")] == 1
    assert samples[("lakeflow_compaction_runs_total", spare, "ok")] == 0
    assert samples[("lakeflow_compaction_rows_out_total", spare, "")] == 0


def _samples(textfile: Path) -> dict[tuple[str, str, str], float]:
    """A textfile's samples by (name, table, result)."""
    return {(s.name, s.labels.get("table", ""), s.labels.get("result", "")): s.value
            for family in text_string_to_metric_families(textfile.read_text()) for s in family.samples}


@pytest.mark.slow
def test_single_run_pushes_to_a_pushgateway(prometheus: Prometheus, tmp_path: Path) -> None:
    port = free_port()
    with open(tmp_path / "pushgateway.log", "wb") as log:
        gateway = subprocess.Popen([tool("prometheus-pushgateway"), f"--web.listen-address=127.0.0.1:{port}"],
                                   stdout=log, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_http(f"{url}/-/ready", timeout=30)
        home = make_home(tmp_path)
        _parts(home, "run-1", 30, DAY_MS)
        done = subprocess.run([str(LAKEFLOW), "compact", "--engine", "arrow", "--pushgateway", url],
                              env={**home.env, "COMPACT_METRICS_PORT": "1"},  # a port applies only with --every
                              cwd=home.home, capture_output=True, text=True, timeout=180)
        assert done.returncode == 0, done.stderr
        prometheus.scrape({"pushgateway": [f"127.0.0.1:{port}"]}, honor_labels=True)
        rows = f'lakeflow_compaction_rows_out_total{{job="lakeflow_compact",table="{TABLE}"}}'
        assert prometheus.wait(rows, lambda v: v is not None) == 30
        assert prometheus.value('lakeflow_compaction_runs_total{job="lakeflow_compact",result="ok"}') == 1

        down = subprocess.run([str(LAKEFLOW), "compact", "--engine", "arrow", "--pushgateway",
                               f"http://127.0.0.1:{free_port()}"], env=home.env, cwd=home.home,
                              capture_output=True, text=True, timeout=180)
        assert down.returncode == 2 and "exporting the run's metrics failed" in down.stderr
    finally:
        stop_process(gateway)


def test_metrics_flags_apply_to_their_mode(tmp_path: Path) -> None:
    home = make_home(tmp_path)
    for args, problem in ((["--metrics-port", "9100"], "--metrics-port applies only with --every"),
                          (["--every", "1m", "--metrics-textfile", "x.prom"], "apply to a single run"),
                          (["--pushgateway", "http://user:pw@localhost:9091"], "credentials inside the URL")):
        done = subprocess.run([str(LAKEFLOW), "compact", *args], env=home.env, cwd=home.home, capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 2 and problem in done.stderr, (args, done.stderr)
        assert "pw" not in done.stderr.replace("COMPACT_PUSHGATEWAY_URL", "")
    with socket.socket() as taken:                                     # the port is another's
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        done = subprocess.run([str(LAKEFLOW), "compact", "--every", "1m", "--metrics-port",
                               str(taken.getsockname()[1])], env=home.env, cwd=home.home, capture_output=True,
                              text=True, timeout=60)
    assert done.returncode == 2 and "cannot serve metrics on 0.0.0.0:" in done.stderr
    assert "Traceback" not in done.stderr


JOB_METRIC = "flink_taskmanager_job_task_operator_lakeflow_{}"


@pytest.mark.slow
def test_prometheus_scrapes_the_flink_job(prometheus: Prometheus, tmp_path: Path) -> None:
    """``lakeflow flink up --metrics-port``: Flink's reporter on the JobManager and the TaskManager;
    the packaged job's own metrics move while readings flow."""
    from lakeflow.runtime.flink_cluster import PROMETHEUS_PORTS, FlinkCluster
    from lakeflow.runtime.homes import flink_home
    from lakeflow.secret import is_secret_key
    from tests.support.fixtures_flink import packaged_job_args

    home = make_home(tmp_path)
    cluster_home, rest_port, port = tmp_path / "cluster", free_port(), free_port()
    cluster = FlinkCluster(cluster_home, rest_port=rest_port, secret_variable=is_secret_key)  # the one flink up starts (same home)
    records = 3000
    env = {**home.env, "NUM_SENSORS": "5", "NUM_RECORDS": str(records), "BATCH_SIZE": "100",
           "BATCH_INTERVAL_MS": "500", "LAKEFLOW_JAR": str(REPO / "build" / "lakeflow-flink.jar")}
    try:
        up = subprocess.run([str(LAKEFLOW), "flink", "up", "--local", "--home", str(cluster_home), "--rest-port",
                             str(rest_port), "--rpc-port", str(free_port()), "--metrics-port", str(port)],
                            env=env, capture_output=True, text=True, timeout=240)
        assert up.returncode == 0, up.stderr[-2000:]
        assert f"http://localhost:{port}/metrics (JobManager)" in up.stdout
        prometheus.scrape({"flink": [f"127.0.0.1:{p}" for p in range(port, port + PROMETHEUS_PORTS)]})
        prometheus.wait('count(up{job="flink"} == 1)', lambda v: v == 2)          # JobManager + TaskManager
        run_env = {k: v for k, v in {**cluster.env(), **env}.items() if k != "PYTHONPATH"}
        with open(tmp_path / "flink-run.log", "w") as log:
            job = subprocess.Popen([str(flink_home() / "bin" / "flink"), *packaged_job_args()], env=run_env, cwd=tmp_path,
                                   stdout=log, stderr=subprocess.STDOUT)
        try:
            written = f'sum({JOB_METRIC.format("readingsWritten")})'
            first = prometheus.wait(written, lambda v: v is not None and v > 0, timeout=180)
            later = prometheus.wait(written, lambda v: v is not None and v > first, timeout=60)  # figures move
            assert first < later <= records
            assert prometheus.wait(f'sum({JOB_METRIC.format("partFilesCommitted")})',
                                   lambda v: v is not None and v > 0, timeout=60) >= 1
            assert 0 < prometheus.value(f'max({JOB_METRIC.format("readingsPerPartFile")})') <= records
            committed_ms = prometheus.value(f'max({JOB_METRIC.format("lastCommitTimestamp")})')
            assert committed_ms is not None and abs(committed_ms / 1000 - time.time()) < 120
            # the JobManager is scraped apart from the TaskManager: its count may trail the committed files
            assert prometheus.wait("max(flink_jobmanager_job_numberOfCompletedCheckpoints)",
                                   lambda v: v is not None and v >= 1, timeout=60) >= 1
            labels = prometheus.query(f'{JOB_METRIC.format("readingsWritten")}')[0]["metric"]
            assert labels["job_name"] and labels["job_id"] and "LakeflowNoPartFileCommitted" not in prometheus.firing()
            assert job.wait(timeout=300) == 0, (tmp_path / "flink-run.log").read_text()[-2000:]
        finally:
            if job.poll() is None:
                job.kill()
    finally:
        cluster.stop()
