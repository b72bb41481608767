"""Operable: the compactor's metrics scraped by a real Prometheus (Debian's ``prometheus``, started
here on 127.0.0.1 with a generated config and lakeflow's alert rules loaded), a single run pushed to a
real Pushgateway (``prometheus-pushgateway``) or written as a node_exporter textfile, and every
alert rule in deploy/prometheus/ checked by ``promtool test rules`` (a firing and a quiet case each).

Unit tests: they start no process. The real-process tests: tests/integration/test_metrics.py."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import yaml

from lakeflow.compaction.metrics import CompactorMetrics
from tests.support.fixtures_compaction import (
    REPO,
)

RULES = REPO / "deploy" / "prometheus" / "lakeflow-rules.yml"


RULE_TESTS = REPO / "deploy" / "prometheus" / "lakeflow-rules.test.yml"


DASHBOARD = REPO / "deploy" / "grafana" / "lakeflow-dashboard.json"


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
    metrics.record({"oldest_new_file_at": found, "duration_s": 1.5}, 2, 2.0)
    assert 599 <= _sample(metrics, "lakeflow_compaction_freshness_lag_seconds") < 700
    metrics.record({}, 3, 0.1)                                    # busy: another holds the lease
    assert _sample(metrics, "lakeflow_compaction_lease_busy") == 1
    assert _sample(metrics, "lakeflow_compaction_freshness_lag_seconds") >= 599
    metrics.record({"rows_in": 10, "rows_out": 10, "files_compacted": 1, "oldest_new_file_at": found}, 0, 1.0)
    assert _sample(metrics, "lakeflow_compaction_freshness_lag_seconds") == 0
    assert _sample(metrics, "lakeflow_compaction_lease_busy") == 0
    assert {r: _sample(metrics, "lakeflow_compaction_runs_total", result=r) for r in ("ok", "error", "busy")} == \
        {"ok": 1, "error": 1, "busy": 1}


def _sample(metrics: CompactorMetrics, name: str, **labels: str) -> float:
    value = metrics.registry.get_sample_value(name, labels)
    assert value is not None, name
    return value


def dashboard_queries() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    return [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]


def test_dashboard_is_grafana_json() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] == "lakeflow" and dashboard["templating"]["list"][0]["type"] == "datasource"
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids)) and len(dashboard_queries()) >= 12
