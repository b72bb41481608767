"""``lakeflow register | vend | doctor | credential-process`` as a user runs them: a subprocess
against the Lakekeeper stand-in, with STS and S3 from moto's server."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import boto3
import pytest

from lakeflow.catalog.lakekeeper import LakekeeperCatalog
from lakeflow.credentials import to_s3a
from tests.support.fixtures_lakekeeper import env_for, settings_for

LAKEFLOW = str(Path(sys.executable).parent / "lakeflow")


def run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([LAKEFLOW, *args], env=env, capture_output=True, text=True, timeout=60)


@pytest.fixture
def env(lakekeeper, tmp_path) -> dict[str, str]:
    return env_for(lakekeeper, LAKEFLOW_HOME=str(tmp_path / "home"), PATH="/usr/bin:/bin")


def secrets_of(lakekeeper) -> list[str]:
    """Every secret the stand-in handed out so far, and its bearer token."""
    assert lakekeeper.vended_secrets
    return [*lakekeeper.vended_secrets, lakekeeper.token]


@pytest.mark.parametrize("command", ["register", "vend", "doctor", "credential-process"])
def test_help(command):
    done = run({"PATH": "/usr/bin:/bin"}, command, "--help")
    assert done.returncode == 0 and "--namespace" in done.stdout and "--local" in done.stdout


def test_register_is_idempotent(lakekeeper, env):
    first = run(env, "register")
    second = run(env, "register")
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    assert first.stdout.strip() == second.stdout.strip()
    assert first.stdout.strip().startswith(lakekeeper.warehouse.base + "/")
    assert "created: iot.sensor-readings" in first.stderr
    assert "already registered: iot.sensor-readings" in second.stderr
    assert len(lakekeeper.warehouse.tables) == 1


def test_vend_hides_secrets_unless_asked(lakekeeper, env):
    run(env, "register")
    done = run(env, "vend")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("# expires-at=20") and "min)" in lines[0]
    settings = dict(line.split("=", 1) for line in lines[1:])
    assert settings["fs.s3a.secret.key"] == "***" and settings["fs.s3a.session.token"] == "***"
    assert settings["fs.s3a.aws.credentials.provider"].endswith("TemporaryAWSCredentialsProvider")
    assert settings["fs.s3a.directory.marker.retention"] == "keep"
    spark = run(env, "vend", "--format", "spark").stdout
    assert "spark.hadoop.fs.s3a.secret.key=***" in spark
    for text in (done.stdout, done.stderr, spark):
        assert not any(s in text for s in secrets_of(lakekeeper))
    shown = run(env, "vend", "--format", "boto3", "--show-secrets").stdout
    assert "aws_session_token=***" not in shown and "aws_session_token=" in shown


def test_doctor_passes_and_cleans_up(lakekeeper, env, moto_server):
    run(env, "register")
    done = run(env, "doctor")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert [line.split(":")[0] for line in lines] == [
        "PASS settings", "PASS token", "PASS warehouse", "PASS table", "PASS credentials", "PASS storage"]
    assert "put, list and delete under s3://" in lines[-1]
    verbose = run(env, "-v", "doctor")  # DEBUG logs of lakeflow, requests, urllib3, boto
    assert verbose.returncode == 0 and "DEBUG" in verbose.stderr
    assert not any(s in verbose.stdout + verbose.stderr for s in secrets_of(lakekeeper))
    bucket = lakekeeper.warehouse.bucket
    assert moto_server.client("s3").list_objects_v2(Bucket=bucket)["KeyCount"] == 0  # probe deleted


def test_doctor_for_a_reader_lists_and_reads_and_writes_nothing(lakekeeper, env, moto_server):
    run(env, "register")
    empty = run(env, "doctor", "--access", "read")
    assert empty.returncode == 0, empty.stdout + empty.stderr
    assert "(nothing there to read yet)" in empty.stdout.splitlines()[-1]
    location = next(iter(lakekeeper.warehouse.tables.values())).location
    bucket, prefix = lakekeeper.warehouse.bucket, location.split("/", 3)[3].rstrip("/")
    s3 = moto_server.client("s3")
    s3.put_object(Bucket=bucket, Key=f"{prefix}/part-0.json", Body=b"[]")
    done = run(env, "doctor", "--access", "read")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PASS storage: list and read under s3://" in done.stdout
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]] == [f"{prefix}/part-0.json"]


def test_doctor_fails_clearly_on_bad_credentials(make_lakekeeper, moto_strict, tmp_path):
    lakekeeper = make_lakekeeper(s3=moto_strict)
    env = env_for(lakekeeper, LAKEFLOW_HOME=str(tmp_path))
    run(env, "register")
    lakekeeper.faults.bogus_credentials = True
    done = run(env, "doctor")
    assert done.returncode == 1
    failed = [line for line in done.stdout.splitlines() if line.startswith("FAIL")]
    assert len(failed) == 1 and failed[0].startswith("FAIL storage: put s3://")
    assert "InvalidAccessKeyId" in failed[0]
    assert lakekeeper.token not in done.stdout + done.stderr


def test_doctor_reports_an_unregistered_table_and_skips_the_rest(env):
    done = run(env, "doctor", "--table", "not-there")
    assert done.returncode == 1
    failed = next(line for line in done.stdout.splitlines() if line.startswith("FAIL"))
    assert failed.startswith("FAIL table: ")
    assert "load iot.not-there: the table does not exist or is not visible to this principal" in failed
    assert failed.endswith(": run `lakeflow register`")
    assert "SKIP storage: needs table" in done.stdout


def test_doctor_uses_the_endpoint_override(lakekeeper, env, moto_server):
    lakekeeper.warehouse.vended_endpoint = "http://127.0.0.1:9"  # what Lakekeeper itself would use
    run(env, "register")
    unreachable = run(env, "doctor")
    assert unreachable.returncode == 1 and "FAIL storage: put s3://" in unreachable.stdout
    assert "127.0.0.1:9" in unreachable.stdout
    overridden = run({**env, "S3_ENDPOINT": moto_server.url}, "doctor")
    assert overridden.returncode == 0, overridden.stdout


def test_doctor_with_oauth(lakekeeper, env, oauth):
    lakekeeper.accept(oauth.is_valid)
    oauth_env = {**env, "TOKEN": "", "OAUTH_TOKEN_URL": oauth.token_url,
                 "OAUTH_CLIENT_ID": oauth.client_id, "OAUTH_CLIENT_SECRET": oauth.client_secret}
    assert run(oauth_env, "register").returncode == 0
    done = run(oauth_env, "doctor")
    assert done.returncode == 0, done.stdout
    assert f"PASS token: OAuth2 client-credentials token fetched from {oauth.token_url}" in done.stdout
    bad = run({**oauth_env, "OAUTH_CLIENT_SECRET": "wrong-secret"}, "doctor")
    assert bad.returncode == 1 and "FAIL token:" in bad.stdout and "invalid_client" in bad.stdout
    assert "wrong-secret" not in bad.stdout + bad.stderr and oauth.client_secret not in bad.stdout


def test_settings_errors_name_the_variable(env):
    done = run({**env, "HTTP_MAX_RETRIES": "many"}, "register")
    assert done.returncode == 2
    assert "HTTP_MAX_RETRIES='many'" in done.stderr and "expected" in done.stderr


def test_catalog_errors_exit_2_with_the_servers_words(lakekeeper, env):
    lakekeeper.revoke(lakekeeper.token)
    done = run(env, "register")
    assert done.returncode == 2
    assert "401 AuthenticationFailed" in done.stderr and "error id" in done.stderr
    assert lakekeeper.token not in done.stderr


def test_credential_process_feeds_boto3(lakekeeper, env, tmp_path, monkeypatch):
    run(env, "register")
    done = run(env, "credential-process", "--namespace", "iot", "--table", "sensor-readings")
    assert done.returncode == 0, done.stderr
    creds = json.loads(done.stdout)
    assert creds["Version"] == 1 and creds["SessionToken"] and creds["Expiration"].endswith("Z")
    assert len(lakekeeper.calls("GET", "/credentials")) == 1  # the cheap refresh, not a load
    # as the AWS SDK runs it: credential_process in a profile
    config = tmp_path / "aws-config"
    config.write_text(f"[profile lakeflow]\ncredential_process = {LAKEFLOW} credential-process "
                      "--namespace iot --table sensor-readings\n")
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    handle = LakekeeperCatalog.from_settings(settings_for(lakekeeper)).load(("iot",), "sensor-readings")
    kwargs = to_s3a(handle.storage).boto3()
    session = boto3.Session(profile_name="lakeflow")
    s3 = session.client("s3", endpoint_url=kwargs["endpoint_url"], region_name=kwargs["region_name"])
    bucket, _, key = handle.location.removeprefix("s3://").partition("/")
    s3.put_object(Bucket=bucket, Key=f"{key}/via-credential-process.json", Body=b"[]")
    assert session.get_credentials().token  # the session token came from lakeflow


def test_local_catalog_commands(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "LAKEFLOW_HOME": str(tmp_path), "LAKEFLOW_ENV_FILE": "/dev/null",
           "LAKEKEEPER": "http://127.0.0.1:9", "WAREHOUSE_ID": "ignored-with-local"}
    registered = run(env, "register", "--local", "--namespace", "iot.raw", "--table", "t")
    assert registered.returncode == 0 and registered.stdout.strip().startswith(tmp_path.as_uri())
    assert "# " in run(env, "vend", "--local", "--namespace", "iot.raw", "--table", "t").stdout
    doctor = run(env, "doctor", "--local", "--namespace", "iot.raw", "--table", "t")
    assert doctor.returncode == 0 and "is writable" in doctor.stdout
