"""Settings: defaults, .env.local under the environment, one error naming every bad variable."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from lakeflow.settings import DEFAULT_LAKEKEEPER, SettingsError, load_settings

UUID = "0196a3b8-41f6-7d52-9d2c-2b5f1f0c8a11"
NO_FILE = Path(os.devnull)


def load(**env: str):
    return load_settings(env, NO_FILE)


def test_defaults_use_the_embedded_catalog():
    s = load()
    assert s.catalog == "local"
    assert s.lakekeeper == DEFAULT_LAKEKEEPER
    assert (s.namespace, s.table) == (("iot",), "sensor-readings")
    assert (s.num_sensors, s.num_records, s.batch_size, s.batch_interval_ms) == (5, -1, 10, 15000)
    assert s.oauth_scope == "lakekeeper"
    assert s.token is None and s.warehouse is None


def test_lakekeeper_when_configured_and_local_flag_wins():
    s = load(LAKEKEEPER="http://lk:8181/", WAREHOUSE_ID=UUID, NAMESPACE="iot.raw")
    assert (s.catalog, s.lakekeeper, s.warehouse) == ("lakekeeper", "http://lk:8181", UUID)
    assert s.namespace == ("iot", "raw") and s.namespace_str == "iot.raw"
    assert load_settings({"LAKEKEEPER": "http://lk:8181"}, NO_FILE, local=True).catalog == "local"


def test_a_warehouse_name_is_accepted():
    assert load(WAREHOUSE_ID="demo-warehouse").warehouse == "demo-warehouse"


@pytest.mark.parametrize("name, value", [
    ("NUM_SENSORS", "0"), ("NUM_SENSORS", "five"), ("NUM_RECORDS", "0"), ("NUM_RECORDS", "-2"),
    ("BATCH_SIZE", "-1"), ("BATCH_INTERVAL_MS", "15s"), ("HTTP_TIMEOUT_S", "0"),
    ("HTTP_TIMEOUT_S", "soon"), ("HTTP_MAX_RETRIES", "-1"), ("HTTP_MAX_RETRIES", "2.5"),
    ("LAKEKEEPER", "ftp://lk:8181"), ("LAKEKEEPER", "localhost:8181"),
    ("S3_ENDPOINT", "minio:9000"), ("NAMESPACE", "iot..raw"), ("NAMESPACE", "iot raw"),
    ("TABLE", "sensor/readings"), ("WAREHOUSE_ID", "my warehouse!"),
])
def test_each_bad_value_is_named_with_what_is_expected(name, value):
    env = {"WAREHOUSE_ID": UUID, name: value}
    with pytest.raises(SettingsError) as err:
        load(**env)
    message = str(err.value)
    assert f"{name}={value!r}" in message
    assert "expected" in message


def test_all_errors_are_reported_at_once():
    with pytest.raises(SettingsError) as err:
        load(NUM_SENSORS="x", BATCH_SIZE="y", TABLE="a b")
    assert all(name in str(err.value) for name in ("NUM_SENSORS", "BATCH_SIZE", "TABLE"))


def test_lakekeeper_needs_a_warehouse():
    with pytest.raises(SettingsError, match="WAREHOUSE_ID is missing"):
        load(LAKEKEEPER="http://lk:8181")


def test_token_and_oauth_exclude_each_other_and_oauth_needs_all_three():
    with pytest.raises(SettingsError, match="TOKEN and OAUTH_"):
        load(WAREHOUSE_ID=UUID, TOKEN="t", OAUTH_CLIENT_ID="c")
    with pytest.raises(SettingsError) as err:
        load(WAREHOUSE_ID=UUID, OAUTH_CLIENT_ID="c")
    assert "OAUTH_CLIENT_SECRET, OAUTH_TOKEN_URL missing" in str(err.value)
    with pytest.raises(SettingsError, match="OAUTH_TOKEN_URL='ldap://x'"):
        load(WAREHOUSE_ID=UUID, OAUTH_TOKEN_URL="ldap://x", OAUTH_CLIENT_ID="c", OAUTH_CLIENT_SECRET="s")


def test_env_file_is_read_and_the_environment_wins(tmp_path):
    env_file = tmp_path / ".env.local"
    env_file.write_text("TABLE=from-file\nNUM_SENSORS=7\nTOKEN=file-token\nWAREHOUSE_ID=" + UUID + "\n")
    s = load_settings({"NUM_SENSORS": "9", "BATCH_SIZE": ""}, env_file)
    assert (s.table, s.num_sensors, s.batch_size) == ("from-file", 9, 10)  # "" counts as unset
    assert s.catalog == "lakekeeper" and s.token is not None and s.token.reveal() == "file-token"
    assert load_settings({"LAKEFLOW_ENV_FILE": str(env_file)}).table == "from-file"


def test_secrets_never_show():
    s = load(WAREHOUSE_ID=UUID, OAUTH_TOKEN_URL="http://kc/token", OAUTH_CLIENT_ID="lakeflow",
             OAUTH_CLIENT_SECRET="client-secret-value")
    t = load(WAREHOUSE_ID=UUID, TOKEN="bearer-token-value")
    for text in (repr(s), str(s), repr(t), str(s.describe()), str(t.describe())):
        assert "client-secret-value" not in text and "bearer-token-value" not in text
    assert t.describe()["token"] == "***"
    assert s.oauth_client_secret is not None and s.oauth_client_secret.reveal() == "client-secret-value"


@pytest.mark.parametrize("name, value, shown", [
    ("LAKEKEEPER", "http://admin:pa55w0rd@lk:80x", "http://admin:***@lk:80x"),           # bad port
    ("LAKEKEEPER", "http://admin:pa55/w0rd@lk:8181", "http://admin:***@lk:8181"),        # '/' in the password
    ("LAKEKEEPER", "http://lk:8181/?api_key=pa55w0rd", "http://lk:8181/?api_key=***"),    # a base URL's query
    ("OAUTH_TOKEN_URL", "ldap://admin:pa55w0rd@kc/token", "ldap://admin:***@kc/token"),
    ("S3_ENDPOINT", "http://AKIAKEY:pa55w0rd@minio:9000", "http://AKIAKEY:***@minio:9000"),
])
def test_a_bad_url_is_shown_without_its_password(name, value, shown):
    env = {"WAREHOUSE_ID": UUID, "OAUTH_CLIENT_ID": "c", "OAUTH_CLIENT_SECRET": "s",
           "OAUTH_TOKEN_URL": "http://kc/token", name: value}
    with pytest.raises(SettingsError) as err:
        load(**env)
    message = str(err.value)
    assert "pa55w0rd" not in message
    assert shown in message


# --- .env.example: written from the models ------------------------------------------------------

REPO = Path(__file__).resolve().parents[2]
# Variables lakeflow sets or passes through for the processes it starts, not settings of a user's.
PROCESS_INTERNALS = {"PATH", "PYSPARK_SUBMIT_ARGS", "PYSPARK_GATEWAY_PORT", "PYFLINK_GATEWAY_PORT", "FLINK_PID_DIR",
                     "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"}  # the last two: requests' own, read once by the Flink client


def documented() -> set[str]:
    """The variables .env.example documents, set or commented out."""
    return set(re.findall(r"^(?:# )?([A-Z][A-Z0-9_]*)=", (REPO / ".env.example").read_text(), re.M))


def test_env_example_is_the_models_rendered():
    from lakeflow.cli.env_example import render, sections
    from lakeflow.settings.env import variables

    assert (REPO / ".env.example").read_text() == render(), \
        "stale .env.example: python -m lakeflow.cli.env_example > .env.example"
    names = {name for model in sections() for name in variables(model)}
    assert documented() == names
    for model in sections():
        for name, field in variables(model).items():
            assert field.description, f"{name}: no description"


def test_every_variable_the_code_reads_is_documented():
    read = set()
    for path in [*(REPO / "lakeflow").rglob("*.py"), *(REPO / "jobs").rglob("*.py")]:
        text = path.read_text()
        read |= set(re.findall(r"environ(?:\.get)?[(\[]\s*[\"']([A-Z][A-Z0-9_]+)[\"']", text))
        read |= set(re.findall(r"process_environment\(\s*[\"']([A-Z][A-Z0-9_]+)[\"']", text))
    assert {"LAKEFLOW_JAR", "FLINK_PLUGINS_DIR", "FLINK_LOG_DIR"} <= read  # the pattern sees the reads
    assert read - PROCESS_INTERNALS <= documented(), sorted(read - PROCESS_INTERNALS - documented())


def test_process_settings_are_typed_and_read_only_when_asked(monkeypatch, tmp_path):
    from lakeflow.ingest.helpers_jar import jar_path
    from lakeflow.settings.process import process_environment

    jar = tmp_path / "helpers.jar"
    jar.write_bytes(b"PK")
    monkeypatch.setenv("LAKEFLOW_JAR", str(jar))
    monkeypatch.setenv("SPARK_MASTER_PORT", "not a port")  # not asked for: cannot fail the caller
    assert process_environment("LAKEFLOW_JAR").jar == jar and jar_path() == jar
    with pytest.raises(SettingsError, match=r"^invalid process settings: SPARK_MASTER_PORT='not a port': "
                                            r"expected a port number \(0 to 65535\)$"):
        process_environment("SPARK_MASTER_PORT")


def test_overrides_win_over_the_environment_and_the_env_file(tmp_path):
    env_file = tmp_path / ".env.local"
    env_file.write_text("TABLE=from-file\nNAMESPACE=file.ns\n")
    s = load_settings({"NAMESPACE": "env.ns"}, env_file, overrides={"TABLE": "from-flag"})
    assert (s.namespace, s.table) == (("env", "ns"), "from-flag")


def test_env_example_copied_as_is_keeps_the_embedded_catalog_and_a_bounded_demo():
    s = load_settings({}, REPO / ".env.example")
    assert (s.catalog, s.num_records, s.token, s.warehouse) == ("local", 1000, None, None)
