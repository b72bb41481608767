"""Recipes (DataHub's flink-source layout) and CLI flags."""

import json

import pytest

from lakeflow.cli.main import main
from lakeflow.lineage.config import CatalogPlatform, ConfigError, from_mapping, load_recipe

RECIPE = """
source:
  type: flink
  config:
    connection:
      rest_api_url: "{url}"
      token: "${{FLINK_TEST_TOKEN}}"
      timeout_seconds: 5
      max_retries: 2
      verify_ssl: false
    job_name_pattern:
      allow: ["^harvest-"]
      deny: [".*print$"]
    include_job_states: [running, finished, failed]
    env: DEV
    platform_instance: lab
    platform_instance_map: {{kafka: prod-kafka}}
    catalog_platform_map:
      lake: {{platform: iceberg, platform_instance: lake-1}}
    operator_granularity: vertex
    include_run_history: false
    max_workers: 4
    stateful_ingestion:
      enabled: true
      state_file: "{state}"
      fail_safe_threshold: 50
sink:
  type: datahub-rest
  config: {{server: "http://localhost:8080"}}
"""


def test_a_datahub_shaped_recipe_is_read(tmp_path, monkeypatch):
    monkeypatch.setenv("FLINK_TEST_TOKEN", "s3cr3t")
    path = tmp_path / "recipe.yml"
    path.write_text(RECIPE.format(url="http://jm:8081", state=tmp_path / "state.json"))
    cfg = load_recipe(path)
    assert cfg.connection.url == "http://jm:8081" and cfg.connection.auth.token.reveal() == "s3cr3t"
    assert (cfg.connection.timeout_s, cfg.connection.max_retries, cfg.connection.verify_ssl) == (5.0, 2, False)
    assert cfg.job_name_pattern.allowed("harvest-batch") and not cfg.job_name_pattern.allowed("harvest-sql-print")
    assert cfg.include_job_states == ("RUNNING", "FINISHED", "FAILED")
    assert cfg.catalog_platform_map == {"lake": CatalogPlatform("iceberg", "lake-1")}
    assert (cfg.env, cfg.platform_instance, cfg.operator_granularity, cfg.include_run_history) == ("DEV", "lab", "vertex", False)
    assert (cfg.state_file, cfg.fail_safe_threshold, cfg.max_workers) == (tmp_path / "state.json", 50.0, 4)
    assert "s3cr3t" not in repr(cfg)


@pytest.mark.parametrize("config, message", [
    ({}, "rest_api_url: required"),
    ({"connection": {"rest_api_url": "u", "token": "t", "username": "a", "password": "p"}}, "not both"),
    ({"connection": {"rest_api_url": "u", "timeout": 3}}, r"config.connection: unknown key\(s\) timeout"),
    ({"connection": {"rest_api_url": "u"}, "include_job_states": ["DONE"]}, "unknown state"),
    ({"connection": {"rest_api_url": "u"}, "max_workers": "ten"}, "config.max_workers: expected int"),
    ({"connection": {"rest_api_url": "u"}, "operator_granularity": "task"}, "expected 'job' or 'vertex'"),
    ({"connection": {"rest_api_url": "u"}, "job_name_pattern": {"allow": ["("]}}, "not a regular expression"),
    ({"connection": {"rest_api_url": "u"}, "stateful_ingestion": {"enabled": True}}, "state_file: required"),
])
def test_bad_config_names_the_key(config, message):
    with pytest.raises(ConfigError, match=message):
        from_mapping(config)


def test_unset_environment_variable_in_a_recipe_is_named(tmp_path, monkeypatch):
    monkeypatch.delenv("FLINK_TEST_TOKEN", raising=False)
    path = tmp_path / "r.yml"
    path.write_text(RECIPE.format(url="http://jm", state="s"))
    with pytest.raises(ConfigError, match="FLINK_TEST_TOKEN is not set"):
        load_recipe(path)


def test_flags_override_the_recipe(recorded_jobmanager, tmp_path, monkeypatch):
    monkeypatch.setenv("FLINK_TEST_TOKEN", "s3cr3t")
    path = tmp_path / "recipe.yml"
    path.write_text(RECIPE.format(url="http://unreachable.invalid:1", state=tmp_path / "state.json"))
    out = tmp_path / "o.json"
    assert main(["harvest", "--recipe", str(path), "--rest-url", recorded_jobmanager.url, "--output", str(out),
                 "--job-name-allow", "^harvest-batch$", "--operator-granularity", "job"]) == 0
    doc = json.loads(out.read_text())
    assert [j["name"] for j in doc["jobs"]] == ["harvest-batch"] and doc["runs"] == []  # recipe: no run history
    assert recorded_jobmanager.requests[0][1]["Authorization"] == "Bearer s3cr3t"


def test_no_rest_url_is_a_clear_error(capsys):
    assert main(["harvest"]) == 2
    assert "give --rest-url URL" in capsys.readouterr().err
