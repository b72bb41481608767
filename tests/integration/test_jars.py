"""lakeflow.runtime.jars: versions from the installed wheels, Maven fetching with verified checksums, the
offline message, the Flink plugin's installation — and, slow, the fetched jars against moto with
IAM enforced and assumed-role credentials (Spark's s3a:// and s3://, Flink's FileSink on s3://).

The unit tests (no process): tests/unit/test_jars.py.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import subprocess
import sys
import threading
import zipfile
from functools import partial
from pathlib import Path
from typing import Iterator

import boto3
import pytest
from botocore.exceptions import ClientError

from lakeflow.runtime import jars
from lakeflow.runtime.homes import flink_home
from tests.support.envs import INGEST_PY
from tests.support.fixtures_servers import run_moto
from tests.unit.test_jars import jars_dir  # noqa: F401 (fixtures, constants)

CHECKS = Path(__file__).parents[1] / "support" / "s3_jars_checks.py"


REAL_M2 = jars.jars_dir() / "m2"  # Maven's repository of `make s3-jars` (Maven's own plugins)


def test_versions_come_from_the_installed_wheels(tmp_path: Path) -> None:
    ingestion = subprocess.run([INGEST_PY, "-c", "from importlib.metadata import version; print(version('apache-flink'))"],
                               capture_output=True, text=True, check=True)
    assert jars.flink_version() == ingestion.stdout.strip() == "2.3.0"
    client_api = list(jars.pyspark_jars_dir().glob("hadoop-client-api-*.jar"))
    assert len(client_api) == 1 and client_api[0].name == f"hadoop-client-api-{jars.hadoop_version()}.jar"

    fake = tmp_path / "spark-jars"
    fake.mkdir()
    with pytest.raises(jars.JarsUnavailable, match="found none"):
        jars.hadoop_version(fake)
    (fake / "hadoop-client-api-3.4.1.jar").touch()
    (fake / "hadoop-client-runtime-3.4.1.jar").touch()
    assert jars.hadoop_version(fake) == "3.4.1"
    (fake / "hadoop-client-api-3.3.6.jar").touch()
    with pytest.raises(jars.JarsUnavailable, match="3.3.6.*3.4.1"):
        jars.hadoop_version(fake)


class _Repo(http.server.SimpleHTTPRequestHandler):
    """A Maven repository: ``root`` first, then Maven's local repository (for Maven's own plugins)."""

    def __init__(self, *args, root: Path, fallback: Path, **kwargs) -> None:
        self.root, self.fallback = root, fallback
        super().__init__(*args, directory=str(root), **kwargs)

    def translate_path(self, path: str) -> str:
        mine = Path(super().translate_path(path))
        if mine.exists() or mine.parent.is_dir():  # an artifact published here: only what is here
            return str(mine)
        return str(self.fallback / mine.relative_to(self.root))

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def maven_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """``$MAVEN_REPO`` on 127.0.0.1; Maven's plugins come from build/jars/m2 (``make s3-jars``)."""
    if not list(REAL_M2.glob("org/apache/maven/plugins/maven-dependency-plugin/*/*.jar")):
        with monkeypatch.context() as real:  # the real fetch brings Maven's plugins into build/jars/m2
            real.setenv("LAKEFLOW_JARS_DIR", str(REAL_M2.parent))
            jars.fetch(jars.flink_set())
    root = tmp_path / "repo"
    root.mkdir()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), partial(_Repo, root=root, fallback=REAL_M2))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("MAVEN_REPO", f"http://127.0.0.1:{server.server_address[1]}")
    try:
        yield root
    finally:
        server.shutdown()


def publish(root: Path, content: bytes, sha1: str) -> None:
    """The Flink plugin artifact in the repository, with the given published SHA-1."""
    v = jars.flink_version()
    folder = root / "org/apache/flink/flink-s3-fs-hadoop" / v
    folder.mkdir(parents=True, exist_ok=True)
    pom = (f'<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
           f"<groupId>org.apache.flink</groupId><artifactId>flink-s3-fs-hadoop</artifactId>"
           f"<version>{v}</version></project>").encode()
    for name, data in ((f"flink-s3-fs-hadoop-{v}.pom", pom), (f"flink-s3-fs-hadoop-{v}.jar", content)):
        (folder / name).write_bytes(data)
        (folder / f"{name}.sha1").write_text(hashlib.sha1(data).hexdigest())
    (folder / f"flink-s3-fs-hadoop-{v}.jar.sha1").write_text(sha1)


@pytest.mark.slow  # three Maven runs, ~7 s each
def test_maven_refuses_a_download_whose_checksum_does_not_match(jars_dir: Path, maven_repo: Path) -> None:
    flink = jars.flink_set()
    publish(maven_repo, b"tampered jar", hashlib.sha1(b"the real jar").hexdigest() + "  x.jar\n")
    with pytest.raises(jars.JarsUnavailable, match=r"Maven failed: .*[Cc]hecksum validation failed"):
        jars.fetch(flink)
    assert not flink.folder.exists() and not list(jars_dir.glob(".flink-*"))  # nothing half-written
    (maven_repo / "org/apache/flink/flink-s3-fs-hadoop" / jars.flink_version() / f"{flink.key_jar}.sha1").unlink()
    with pytest.raises(jars.JarsUnavailable, match=r"[Cc]hecksum validation failed, no checksums available"):
        jars.fetch(flink)  # no published checksum: refused too
    assert not flink.folder.exists()

    publish(maven_repo, b"the real jar", hashlib.sha1(b"the real jar").hexdigest() + "  x.jar\n")
    assert jars.fetch(flink) == [flink.folder / flink.key_jar]
    assert (flink.folder / flink.key_jar).read_bytes() == b"the real jar"


@pytest.mark.slow
def test_maven_unreachable_gives_the_offline_message(jars_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.support.fixtures_servers import free_port

    monkeypatch.setenv("MAVEN_REPO", f"http://127.0.0.1:{free_port()}")  # nobody listens
    with pytest.raises(jars.JarsUnavailable) as err:
        jars.fetch(jars.flink_set())
    assert "Maven failed" in str(err.value) and "make s3-jars" in str(err.value)
    assert f"org.apache.flink:flink-s3-fs-hadoop:{jars.flink_version()}" in str(err.value)


BOOTSTRAP_CALLS = 6  # bucket, user, user policy, role, role policy, access key


@pytest.fixture(scope="module")
def assumed_role(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """moto (S3 + STS + IAM) with auth enforced after the bootstrap, and a JSON file holding
    credentials of an assumed role allowed s3:* (endpoint included)."""
    with run_moto(tmp_path_factory.mktemp("moto-jars"), strict_bootstrap_calls=BOOTSTRAP_CALLS) as moto:
        boot = dict(endpoint_url=moto.url, region_name="us-east-1", aws_access_key_id="bootstrap",
                    aws_secret_access_key="bootstrap")
        iam, s3 = boto3.client("iam", **boot), boto3.client("s3", **boot)
        allow = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
        s3.create_bucket(Bucket="lake")
        iam.create_user(UserName="lakekeeper")
        iam.put_user_policy(UserName="lakekeeper", PolicyName="all", PolicyDocument=json.dumps(allow))
        iam.create_role(RoleName="table-writer", AssumeRolePolicyDocument=json.dumps(
            {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"AWS": "*"},
                                                     "Action": "sts:AssumeRole"}]}))
        iam.put_role_policy(RoleName="table-writer", PolicyName="s3", PolicyDocument=json.dumps(
            {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}))
        key = iam.create_access_key(UserName="lakekeeper")["AccessKey"]
        sts = boto3.client("sts", endpoint_url=moto.url, region_name="us-east-1",
                           aws_access_key_id=key["AccessKeyId"], aws_secret_access_key=key["SecretAccessKey"])
        creds = sts.assume_role(RoleArn="arn:aws:iam::123456789012:role/table-writer",
                                RoleSessionName="lakeflow")["Credentials"]
        path = tmp_path_factory.mktemp("creds") / "creds.json"
        path.write_text(json.dumps({"endpoint": moto.url, "access_key": creds["AccessKeyId"],
                                    "secret_key": creds["SecretAccessKey"], "session_token": creds["SessionToken"]}))
        yield path


def with_wrong_secret(creds: Path, tmp_path: Path) -> Path:
    bad = {**json.loads(creds.read_text()), "secret_key": "x" * 40}
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bad))
    return path


def objects(creds: Path, prefix: str) -> list[str]:
    c = json.loads(creds.read_text())
    s3 = boto3.client("s3", endpoint_url=c["endpoint"], region_name="us-east-1", aws_access_key_id=c["access_key"],
                      aws_secret_access_key=c["secret_key"], aws_session_token=c["session_token"])
    return [o["Key"] for o in s3.list_objects_v2(Bucket="lake", Prefix=prefix).get("Contents", [])]


@pytest.mark.slow
def test_spark_reads_and_writes_s3a_and_s3_on_strict_moto(assumed_role: Path, tmp_path: Path) -> None:
    spark_jars = ",".join(str(j) for j in jars.spark_s3_jars())  # fetched into build/jars/ if need be
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    run = partial(subprocess.run, capture_output=True, text=True, timeout=300, env=env)
    done = run([sys.executable, str(CHECKS), "spark", str(assumed_role), spark_jars,
                "s3a://lake/spark/a", "s3://lake/spark/b"])
    assert done.returncode == 0, done.stderr[-3000:]
    assert "OK s3a://lake/spark/a 100" in done.stdout and "OK s3://lake/spark/b 100" in done.stdout
    assert any(k.endswith(".parquet") for k in objects(assumed_role, "spark/b/"))
    with pytest.raises(ClientError, match="SignatureDoesNotMatch"):  # moto really checks signatures
        objects(with_wrong_secret(assumed_role, tmp_path), "spark/")


@pytest.mark.slow
def test_flink_file_sink_writes_s3_on_strict_moto(assumed_role: Path, tmp_path: Path) -> None:
    """Flink 2.3's flink-s3-fs-hadoop shades hadoop-aws 3.3.4 with the AWS SDK v1, which signs
    User-Agent: moto verifies it once run_moto has it sign what the client signed."""
    plugins = tmp_path / "plugins"
    jar = jars.install_flink_plugin(plugins)
    with zipfile.ZipFile(jar) as z:
        assert "com/amazonaws/services/s3/AmazonS3Client.class" in z.namelist()  # SDK v1 inside
    env = {**os.environ, "FLINK_HOME": str(flink_home()),  # else PyFlink resets FLINK_PLUGINS_DIR
           "FLINK_PLUGINS_DIR": str(plugins), "FLINK_LOG_DIR": str(tmp_path / "log")}
    run = partial(subprocess.run, capture_output=True, text=True, timeout=300, env=env)
    done = run([INGEST_PY, str(CHECKS), "flink", str(assumed_role), "s3://lake/flink/run1"])
    assert done.returncode == 0, done.stderr[-3000:]
    written = [k for k in objects(assumed_role, "flink/run1/") if "/part-" in k and "inprogress" not in k]
    assert written, "no committed part file"

    refused = run([INGEST_PY, str(CHECKS), "flink", str(with_wrong_secret(assumed_role, tmp_path)),
                   "s3://lake/flink/run2"])
    assert refused.returncode == 1 and "403" in refused.stderr  # the check's uncaught S3A error
