"""Operable: the compactor's metrics scraped by a real Prometheus (Debian's ``prometheus``, started
here on 127.0.0.1 with a generated config and lakeflow's alert rules loaded), a single run pushed to a
real Pushgateway (``prometheus-pushgateway``) or written as a node_exporter textfile, and every
alert rule in deploy/prometheus/ checked by ``promtool test rules`` (a firing and a quiet case each).

Unit tests: they start no process. The real-process tests: tests/integration/test_metrics.py."""

from __future__ import annotations

import json
import math
import re
import time
from datetime import datetime, timedelta, timezone

import yaml

from lakeflow.compaction.metrics import CompactorMetrics
from tests.support.fixtures_compaction import (
    REPO,
)

RULES = REPO / "deploy" / "prometheus" / "lakeflow-rules.yml"


RULE_TESTS = REPO / "deploy" / "prometheus" / "lakeflow-rules.test.yml"


DASHBOARD = REPO / "deploy" / "grafana" / "lakeflow-dashboard.json"


TABLE = "iot.sensor-readings-compacted"


def test_every_alert_has_a_firing_and_a_quiet_case() -> None:
    alerts = {r["alert"] for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"] if "alert" in r}
    cases: dict[str, list[bool]] = {}
    for case in yaml.safe_load(RULE_TESTS.read_text())["tests"]:
        for check in case["alert_rule_test"]:
            cases.setdefault(check["alertname"], []).append(bool(check["exp_alerts"]))
    assert len(alerts) == 5 and set(cases) == alerts
    assert all(sorted(set(fired)) == [False, True] for fired in cases.values()), cases


def test_freshness_lag_grows_while_runs_fail() -> None:
    metrics = CompactorMetrics()
    found = (datetime.now(timezone.utc) - timedelta(minutes=10)).isoformat(timespec="seconds")
    metrics.record(TABLE, {"oldest_new_file_at": found, "duration_s": 1.5}, 2, 2.0)
    assert 599 <= _sample(metrics, "lakeflow_compaction_freshness_lag_seconds") < 700
    metrics.record(TABLE, {}, 3, 0.1)                             # busy: another holds the lease
    assert _sample(metrics, "lakeflow_compaction_lease_busy") == 1
    assert _sample(metrics, "lakeflow_compaction_freshness_lag_seconds") >= 599
    metrics.record(TABLE, {"rows_in": 10, "rows_out": 10, "files_compacted": 1, "oldest_new_file_at": found}, 0, 1.0)
    assert _sample(metrics, "lakeflow_compaction_freshness_lag_seconds") == 0
    assert _sample(metrics, "lakeflow_compaction_lease_busy") == 0
    assert {r: _sample(metrics, "lakeflow_compaction_runs_total", result=r) for r in ("ok", "error", "busy")} == \
        {"ok": 1, "error": 1, "busy": 1}


def test_two_tables_are_two_label_sets() -> None:
    """One service (or one pass) over a pipeline's streams: each table's figures apart, the process's
    ``running`` unlabelled; a table's series exist from when it is followed, its counters at 0."""
    metrics = CompactorMetrics()
    other = "plant.vibration-compacted"
    metrics.follow(other)
    assert _sample(metrics, "lakeflow_compaction_runs_total", table=other, result="error") == 0
    assert math.isnan(_sample(metrics, "lakeflow_end_to_end_lag_seconds", table=other))
    newest = time.time() - 60
    metrics.record(TABLE, {"rows_in": 40, "rows_out": 40, "files_compacted": 4, "table_snapshots": 1,
                           "newest_event_ms": int(newest * 1000), "duration_s": 1.0}, 0, 1.0)
    found = (datetime.now(timezone.utc) - timedelta(minutes=10)).isoformat(timespec="seconds")
    metrics.record(other, {"oldest_new_file_at": found, "duration_s": 2.0}, 2, 2.0)
    metrics.record(other, {}, 3, 0.1)
    assert {t: _sample(metrics, "lakeflow_compaction_rows_out_total", table=t) for t in (TABLE, other)} == \
        {TABLE: 40, other: 0}
    assert {(t, r): _sample(metrics, "lakeflow_compaction_runs_total", table=t, result=r)
            for t in (TABLE, other) for r in ("ok", "error", "busy")} == \
        {(TABLE, "ok"): 1, (TABLE, "error"): 0, (TABLE, "busy"): 0,
         (other, "ok"): 0, (other, "error"): 1, (other, "busy"): 1}
    assert 60 <= _sample(metrics, "lakeflow_end_to_end_lag_seconds", table=TABLE) < 62
    assert math.isnan(_sample(metrics, "lakeflow_end_to_end_lag_seconds", table=other))
    assert _sample(metrics, "lakeflow_compaction_freshness_lag_seconds", table=TABLE) == 0
    assert _sample(metrics, "lakeflow_compaction_freshness_lag_seconds", table=other) >= 599
    assert (_sample(metrics, "lakeflow_compaction_lease_busy", table=TABLE),
            _sample(metrics, "lakeflow_compaction_lease_busy", table=other)) == (0, 1)
    assert _sample(metrics, "lakeflow_table_snapshots", table=TABLE) == 1
    assert metrics.registry.get_sample_value("lakeflow_compaction_running", {}) == 0   # the process's, no table
    labels = {tuple(sorted(s.labels)) for f in metrics.registry.collect() for s in f.samples}
    assert labels == {(), ("result", "table"), ("kind", "table"), ("table",), ("le", "table")}, labels


def _sample(metrics: CompactorMetrics, name: str, **labels: str) -> float:
    labels = {"table": TABLE, **labels}
    value = metrics.registry.get_sample_value(name, labels)
    assert value is not None, (name, labels)
    return value


def dashboard_queries() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    return [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]


def test_dashboard_is_grafana_json() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] == "lakeflow" and dashboard["templating"]["list"][0]["type"] == "datasource"
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids)) and len(dashboard_queries()) >= 12
    (table,) = [v for v in dashboard["templating"]["list"] if v["name"] == "table"]
    assert table["includeAll"] and "table)" in table["definition"]
    per_table = [e for e in dashboard_queries() if re.search(r"\blakeflow_", e) and "_running" not in e]
    assert per_table and all('{table=~"$table"}' in e and "by (table" in e for e in per_table), per_table
