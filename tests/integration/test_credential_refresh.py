"""Refreshing credentials for long-running jobs: ``lakeflow aws-profile`` writes an AWS profile whose
``credential_process`` is ``lakeflow credential-process``; the AWS SDKs re-run it before expiry.

The Lakekeeper stand-in vends credentials that expire soon after they are handed out (its
``vended_lifetime_s``), so each SDK's refresh logic has to run within the test: boto3 against moto
with auth enforced, and Hadoop S3A (AWS SDK v2's ProfileCredentialsProvider) inside spark-submit.
Every re-mint is counted at the stand-in as a ``GET …/credentials`` call.
"""

from __future__ import annotations

import json
import os
import shlex
import stat
import subprocess
import sys
import time
from pathlib import Path

import boto3
import pytest
from botocore.exceptions import ClientError

from lakeflow.aws_profile import PROVIDERS, SDK_V1_OUTPUT_LIMIT, catalog_settings, refreshing, write_profile
from lakeflow.catalog.lakekeeper import LakekeeperCatalog
from lakeflow.compaction.launch import submit_env
from lakeflow.runtime.homes import spark_home
from lakeflow.credentials import to_s3a
from tests.support.fixtures_lakekeeper import env_for, settings_for

LAKEFLOW = str(Path(sys.executable).parent / "lakeflow")
BOTO3_ADVISORY_S = 15 * 60  # botocore refreshes this long before Expiration
SDK_BUFFER_S = 15           # the AWS SDKs for Java (v1 and v2) re-run a credential process this long before Expiration


def credential_calls(lakekeeper) -> int:
    return len(lakekeeper.calls("GET", "/credentials"))


def engine_env(profile) -> dict[str, str]:
    """An engine's environment: the profile's AWS settings and no other AWS credentials."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    return {**env, **profile.env()}


def test_aws_profile_writes_private_files_and_keyless_settings(lakekeeper, oauth, tmp_path):
    lakekeeper.accept(oauth.is_valid)
    env = env_for(lakekeeper, TOKEN=None, OAUTH_TOKEN_URL=oauth.token_url, OAUTH_CLIENT_ID=oauth.client_id,
                  OAUTH_CLIENT_SECRET=oauth.client_secret, LAKEFLOW_HOME=str(tmp_path / "home"),
                  PATH=os.environ["PATH"])
    assert subprocess.run([LAKEFLOW, "register"], env=env, capture_output=True).returncode == 0
    done = subprocess.run([LAKEFLOW, "aws-profile"], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    settings = dict(line.split("=", 1) for line in done.stdout.splitlines())
    name = "lakeflow.iot.sensor-readings"
    assert settings["fs.s3a.aws.credentials.provider"] == PROVIDERS["v1"]
    assert not {"fs.s3a.access.key", "fs.s3a.secret.key", "fs.s3a.session.token"} & set(settings)
    assert settings["fs.s3a.directory.marker.retention"] == "keep"
    assert settings["containerized.taskmanager.env.AWS_PROFILE"] == name
    folder = tmp_path / "home" / "aws"
    credentials, env_file = folder / "credentials", folder / f"{name}.env"
    assert settings["containerized.taskmanager.env.AWS_CREDENTIAL_PROFILES_FILE"] == str(credentials)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE(credentials.stat().st_mode) == stat.S_IMODE(env_file.stat().st_mode) == 0o600
    # the client secret lives in the env file only
    assert oauth.client_secret in env_file.read_text()
    for text in (done.stdout, done.stderr, credentials.read_text()):
        assert oauth.client_secret not in text and lakekeeper.token not in text

    # the credential_process line runs as the AWS SDKs run it: split like a shell, no environment of ours
    line = next(l for l in credentials.read_text().splitlines() if l.startswith("credential_process"))
    argv = shlex.split(line.split("=", 1)[1].strip())
    before = credential_calls(lakekeeper)
    out = subprocess.run(argv, env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    creds = json.loads(out.stdout)
    assert creds["Version"] == 1 and creds["SessionToken"] in lakekeeper.vended_secrets
    assert len(out.stdout.strip()) < SDK_V1_OUTPUT_LIMIT, "SDK v1 would cut this output off"
    assert credential_calls(lakekeeper) == before + 1 and out.stderr == ""

    # Spark view, v2 provider; a second table's profile joins the same file
    spark = subprocess.run([LAKEFLOW, "aws-profile", "--format", "spark", "--sdk", "v2"], env=env,
                           capture_output=True, text=True, timeout=60)
    assert spark.returncode == 0, spark.stderr
    conf = dict(line.split("=", 1) for line in spark.stdout.splitlines())
    assert conf["spark.hadoop.fs.s3a.aws.credentials.provider"] == PROVIDERS["v2"]
    assert conf["spark.executorEnv.AWS_PROFILE"] == name
    other = {**env, "TABLE": "other-readings"}
    assert subprocess.run([LAKEFLOW, "register"], env=other, capture_output=True).returncode == 0
    assert subprocess.run([LAKEFLOW, "aws-profile"], env=other, capture_output=True).returncode == 0
    sections = [l for l in credentials.read_text().splitlines() if l.startswith("[")]
    assert sections == [f"[{name}]", "[lakeflow.iot.other-readings]"]


def test_aws_profile_refuses_the_local_catalog(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "LAKEFLOW_HOME": str(tmp_path), "LAKEFLOW_ENV_FILE": os.devnull}
    done = subprocess.run([LAKEFLOW, "aws-profile"], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "local catalog vends no credentials" in done.stderr
    assert not (tmp_path / "aws").exists()


def test_boto3_re_vends_through_the_profile_before_expiry(make_lakekeeper, moto_strict, tmp_path, monkeypatch):
    """moto enforces keys and the table-prefix policy: the re-minted credentials are the real, scoped ones."""
    lakekeeper = make_lakekeeper(s3=moto_strict)
    lakekeeper.warehouse.vended_lifetime_s = BOTO3_ADVISORY_S + 3  # boto3 refreshes after 3 s
    settings = settings_for(lakekeeper, LAKEFLOW_HOME=str(tmp_path))
    catalog = LakekeeperCatalog.from_settings(settings)
    handle = catalog.register(settings.namespace, settings.table)
    profile = write_profile(tmp_path / "aws", settings.namespace, settings.table,
                            catalog_settings(settings, catalog.warehouse_id))
    # The stand-in's own boto3 clients live in this process too: give boto3 the profile's files,
    # but name the profile per session rather than through AWS_PROFILE.
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(profile.credentials_file))
    monkeypatch.setenv("AWS_CONFIG_FILE", os.devnull)
    bucket, _, prefix = handle.location.removeprefix("s3://").partition("/")
    calls = credential_calls(lakekeeper)

    session = boto3.Session(profile_name=profile.name)
    s3 = session.client("s3", endpoint_url=moto_strict.endpoint, region_name=moto_strict.region)
    s3.put_object(Bucket=bucket, Key=f"{prefix}/one.json", Body=b"[]")
    s3.put_object(Bucket=bucket, Key=f"{prefix}/two.json", Body=b"[]")
    first = session.get_credentials().get_frozen_credentials()
    assert credential_calls(lakekeeper) == calls + 1  # fresh credentials are reused, not re-minted

    time.sleep(3.5)
    s3.put_object(Bucket=bucket, Key=f"{prefix}/three.json", Body=b"[]")
    second = session.get_credentials().get_frozen_credentials()
    assert credential_calls(lakekeeper) == calls + 2
    assert second.access_key != first.access_key and second.token in lakekeeper.vended_secrets
    listed = s3.list_objects_v2(Bucket=bucket, Prefix=f"{prefix}/")["Contents"]
    assert sorted(o["Key"].rsplit("/", 1)[1] for o in listed) == ["one.json", "three.json", "two.json"]
    with pytest.raises(ClientError, match="AccessDenied"):  # still scoped to the table prefix
        s3.put_object(Bucket=bucket, Key="outside-the-table.json", Body=b"[]")


@pytest.mark.slow
def test_s3a_profile_provider_re_vends_inside_spark(make_lakekeeper, moto_strict, s3a_jars, tmp_path):
    """Real S3A (hadoop-aws of pyspark's Hadoop, AWS SDK v2) with the refreshing settings of ``lakeflow
    aws-profile``: a write, a pause past the SDK's refresh point, a write and reads — the SDK re-ran
    the process (counted at the stand-in), and moto checked every signature and key."""
    lakekeeper = make_lakekeeper(s3=moto_strict)
    lifetime, pause = SDK_BUFFER_S + 8, 10.0
    lakekeeper.warehouse.vended_lifetime_s = lifetime
    settings = settings_for(lakekeeper, LAKEFLOW_HOME=str(tmp_path))
    catalog = LakekeeperCatalog.from_settings(settings)
    handle = catalog.register(settings.namespace, settings.table)
    profile = write_profile(tmp_path / "aws", settings.namespace, settings.table,
                            catalog_settings(settings, catalog.warehouse_id))
    conf = {**refreshing(to_s3a(handle.storage), sdk="v2").spark(),
            "spark.jars": ",".join(str(j) for j in s3a_jars), "spark.ui.enabled": "false", "spark.log.level": "WARN"}
    cmd = [str(spark_home() / "bin" / "spark-submit"), "--master", "local[2]"]
    for key, value in conf.items():
        cmd += ["--conf", f"{key}={value}"]
    location = "s3a://" + handle.location.removeprefix("s3://")
    calls = credential_calls(lakekeeper)
    done = subprocess.run([*cmd, str(Path(__file__).parents[1] / "support" / "s3a_refresh_job.py"), location, str(pause)],
                          env=submit_env(engine_env(profile)), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    assert "rows before=10 after=5" in done.stdout
    assert credential_calls(lakekeeper) - calls >= 2  # minted at the first write, re-minted after the pause
    for secret in lakekeeper.vended_secrets:
        assert secret not in done.stdout + done.stderr
