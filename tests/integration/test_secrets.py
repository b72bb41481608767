"""Known secrets pushed through every entry point: none may show anywhere but where it must go.

The secrets: the OAuth2 client secret and every access token the provider issued, a static
Lakekeeper token, every key and session token the Lakekeeper stand-in vended, Flink REST and
DataHub tokens. Looked for in stdout/stderr of each command, in exception texts and reprs, and in
every file lakeflow left behind (Flink logs, Spark output, Iceberg metadata, lineage events,
reports) — except the files whose job is to hold them, which must be private (0600). Every command
also runs with ``-v`` (debug logging). A leak is reported by kind and place, never by printing the
secret itself.
"""

from __future__ import annotations

import base64
import json
import os
import stat
import subprocess
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping

import pytest
import requests
import yaml

from lakeflow.aws_profile import CREDENTIAL_KEYS
from lakeflow.catalog.base import CatalogError
from lakeflow.catalog.lakekeeper import LakekeeperCatalog
from lakeflow.credentials import to_s3a
from lakeflow.runtime.flink_cluster import FlinkCluster
from lakeflow.secret import is_secret_key
from lakeflow.settings import load_settings
from tests.support.fixtures_compaction import REPO, json_array, make_home, readings, write_parts
from tests.support.fixtures_lakekeeper import env_for
from tests.support.fixtures_servers import free_port
from tests.standins.flink_rest import Answer
from tests.support.envs import INGEST_PY
from tests.support.harvest_scenario import RECORDING

LAKEFLOW = str(Path(sys.executable).parent / "lakeflow")
VERBOSITY = ((), ("-v",))
FLINK_API_TOKEN = "flink-api-t0ken-Zx81Qa"
DATAHUB_TOKEN = "datahub-gms-t0ken-Pw37Lm"
WRONG_SECRET = "wr0ng-client-secret-Kq52"
# What the AWS SDK does with the cluster's environment: find the profile, run its credential_process.
CREDENTIAL_PROBE = """
import json, subprocess, sys, boto3
out = subprocess.run(["sh", "-c", sys.argv[5] + " credential-process --namespace iot --table sensor-readings"],
                     capture_output=True, text=True, check=True).stdout
c = json.loads(out)
boto3.client("s3", endpoint_url=sys.argv[1], region_name=sys.argv[2], aws_access_key_id=c["AccessKeyId"],
             aws_secret_access_key=c["SecretAccessKey"], aws_session_token=c.get("SessionToken")).put_object(
    Bucket=sys.argv[3], Key=sys.argv[4], Body=b"[]")
print("vended")
"""


@dataclass
class Secrets:
    """Secret values by kind; ``leaks`` names where any of them shows."""

    known: dict[str, list[str]] = field(default_factory=dict, repr=False)  # a failing test prints no secret

    def add(self, kind: str, values: Iterable[str]) -> None:
        self.known.setdefault(kind, []).extend(v for v in values if v)

    def leaks(self, texts: Mapping[str, str]) -> list[str]:
        return [f"{kind} in {where}" for where, text in texts.items()
                for kind, values in self.known.items() if any(v in text for v in values)]

    def file_leaks(self, root: Path, allowed: Iterable[Path] = ()) -> list[str]:
        """Files under ``root`` holding a secret (``allowed`` ones must hold mode 0600 instead)."""
        allowed = {p.resolve() for p in allowed}
        found = []
        for path in sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink()):
            if path.resolve() in allowed:
                if stat.S_IMODE(path.stat().st_mode) != 0o600:
                    found.append(f"{path.relative_to(root)} holds secrets but is not 0600")
                continue
            text = path.read_bytes().decode("utf-8", "replace")
            found += self.leaks({str(path.relative_to(root)): text})
        return found


@dataclass
class World:
    lakekeeper: object
    oauth: object
    home: Path
    env: dict[str, str]

    def secrets(self) -> Secrets:
        s = Secrets()
        s.add("OAuth client secret", [self.oauth.client_secret])
        s.add("OAuth access token", self.oauth.issued)
        s.add("static Lakekeeper token", [self.lakekeeper.token])
        s.add("vended secret key or session token", self.lakekeeper.vended_secrets)
        s.add("vended access key", self.lakekeeper.vended_access_keys)
        s.add("Flink REST token", [FLINK_API_TOKEN])
        s.add("DataHub token", [DATAHUB_TOKEN])
        return s


@pytest.fixture
def world(lakekeeper, oauth, tmp_path) -> World:
    """Lakekeeper behind OAuth2; the environment holds the client secret and other tokens."""
    lakekeeper.accept(oauth.is_valid)
    home = tmp_path / "home"
    env = env_for(lakekeeper, TOKEN=None, OAUTH_TOKEN_URL=oauth.token_url, OAUTH_CLIENT_ID=oauth.client_id,
                  OAUTH_CLIENT_SECRET=oauth.client_secret, LAKEFLOW_HOME=str(home),
                  FLINK_API_TOKEN=FLINK_API_TOKEN, DATAHUB_GMS_TOKEN=DATAHUB_TOKEN)
    env.update(PATH=os.environ.get("PATH", "/usr/bin:/bin"), HOME=str(tmp_path))
    return World(lakekeeper, oauth, home, env)


def lakeflow(env: Mapping[str, str], *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([LAKEFLOW, *args], env=dict(env), capture_output=True, text=True, timeout=timeout)


def outputs(name: str, done: subprocess.CompletedProcess, *, stdout: bool = True) -> dict[str, str]:
    return {**({f"{name} stdout": done.stdout} if stdout else {}), f"{name} stderr": done.stderr}


def test_catalog_commands_show_no_secret(world: World, tmp_path: Path):
    texts: dict[str, str] = {}
    for v in VERBOSITY:
        for args in (["register"], ["register"], ["vend"], ["vend", "--format", "spark"], ["vend", "--format", "s3a"],
                     ["vend", "--format", "boto3"], ["doctor"], ["aws-profile"], ["aws-profile", "--format", "spark"]):
            command = " ".join([*v, *args])
            done = lakeflow(world.env, *v, *args)
            assert done.returncode == 0, f"lakeflow {command} exited {done.returncode}"
            texts.update(outputs(f"lakeflow {command}", done))
        process = lakeflow(world.env, *v, "credential-process")
        assert process.returncode == 0 and json.loads(process.stdout)["SecretAccessKey"]  # on stdout: its contract
        texts.update(outputs(" ".join(["lakeflow", *v, "credential-process"]), process, stdout=False))
        # failures: a wrong client secret
        wrong = {**world.env, "OAUTH_CLIENT_SECRET": WRONG_SECRET}
        for args, code in ((["doctor"], 1), (["vend"], 2)):  # doctor: a check failed; vend: the catalog's error
            done = lakeflow(wrong, *v, *args)
            assert done.returncode == code, f"lakeflow {' '.join(args)} exited {done.returncode}"
            texts.update(outputs(f"lakeflow {' '.join([*v, *args])} with a wrong client secret", done))
            assert WRONG_SECRET not in done.stdout + done.stderr
    assert "DEBUG" in texts["lakeflow -v register stderr"]
    # a Lakekeeper that rejects every token
    world.lakekeeper.accept(lambda token: False)
    for v in VERBOSITY:
        done = lakeflow(world.env, *v, "vend")
        assert done.returncode == 2 and "AuthenticationFailed" in done.stderr
        texts.update(outputs(" ".join(["lakeflow", *v, "vend rejected"]), done))

    secrets = world.secrets()
    assert secrets.known["vended access key"] and secrets.known["OAuth access token"]
    leaks = secrets.leaks(texts)
    assert not leaks, leaks
    profile_env = world.home / "aws" / "lakeflow.iot.sensor-readings.env"  # the credential process's catalog login
    leaks = secrets.file_leaks(tmp_path, allowed=[profile_env])
    assert not leaks, leaks


def test_exceptions_and_reprs_show_no_secret(world: World):
    settings = load_settings(world.env)
    catalog = LakekeeperCatalog.from_settings(settings)
    handle = catalog.register(settings.namespace, settings.table)
    s3a = to_s3a(handle.storage)
    texts = {"settings repr": repr(settings), "settings describe": str(settings.describe()),
             "catalog repr": repr(catalog), "handle repr": repr(handle), "vended repr": repr(handle.storage),
             "s3a repr": repr(s3a), "s3a redacted": str(s3a.redacted())}
    world.lakekeeper.faults.plain_text(500, f"internal error near token {settings.oauth_client_id}")
    world.oauth.revoke_all()
    world.lakekeeper.accept(lambda token: False)
    for call in (lambda: catalog.load(settings.namespace, settings.table),
                 lambda: LakekeeperCatalog.from_settings(load_settings(
                     {**world.env, "OAUTH_CLIENT_SECRET": WRONG_SECRET})).load(("iot",), "x")):
        with pytest.raises(CatalogError) as err:
            call()
        texts[f"error {len(texts)}"] = "".join(traceback.format_exception(err.value)) + repr(err.value)
    secrets = world.secrets()
    secrets.add("wrong client secret", [WRONG_SECRET])
    leaks = secrets.leaks(texts)
    assert not leaks, leaks


def test_files_written_with_secrets_are_private(world: World, tmp_path: Path):
    cluster = FlinkCluster(tmp_path / "cluster", conf={"fs.s3a.secret.key": "s3cr3t-for-the-taskmanagers"}, secret_variable=is_secret_key)
    cluster.write_conf()
    assert stat.S_IMODE((cluster.conf_dir / "config.yaml").stat().st_mode) == 0o600
    assert lakeflow(world.env, "register").returncode == 0
    assert lakeflow(world.env, "aws-profile", "--dir", str(tmp_path / "aws")).returncode == 0
    for path in (tmp_path / "aws").iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path.name
    assert stat.S_IMODE((tmp_path / "aws").stat().st_mode) == 0o700


def test_harvest_redacts_secret_job_parameters(world: World, recorded_jobmanager, recorded_scenario, tmp_path: Path):
    """A Flink job's global parameters may carry credentials: the harvester must not copy them out."""
    job = recorded_scenario["job_ids"]["harvest-declared-sink"][0]
    index = json.loads((RECORDING / "index.json").read_text())
    config = json.loads((RECORDING / index[f"/jobs/{job}/config"]["file"]).read_text())
    config["execution-config"]["user-config"].update({
        "s3.secret-key": "job-param-s3cr3t-Hq12", "db.password": "job-param-passw0rd-Rt88",
        "api.token": "job-param-t0ken-Vb55", "fs.s3a.access.key": "AKIAJOBPARAMACCESS01"})
    recorded_jobmanager.route(f"/jobs/{job}/config", Answer(200, config))
    secrets = world.secrets()
    secrets.add("secret job parameter", ["job-param-s3cr3t-Hq12", "job-param-passw0rd-Rt88", "job-param-t0ken-Vb55",
                                         "AKIAJOBPARAMACCESS01"])
    texts = {}
    for v in VERBOSITY:
        for fmt in ("json", "openlineage", "datahub"):
            out = tmp_path / f"harvest.{fmt}"
            done = lakeflow(world.env, *v, "harvest", "--rest-url", recorded_jobmanager.url, "--format", fmt,
                            "--output", str(out))
            assert done.returncode == 0 and out.exists(), done.stderr[-1000:]
            name = " ".join(["harvest", *v, fmt])
            texts.update({**outputs(name, done), f"{name} output": out.read_text()})
    assert "declared" in texts["harvest json output"] or job in texts["harvest json output"]
    sent = [h.get("Authorization") for _, h in recorded_jobmanager.requests]
    assert sent and all(a == f"Bearer {FLINK_API_TOKEN}" for a in sent)  # where the token must go
    leaks = secrets.leaks(texts)
    assert not leaks, leaks


def test_harvest_publishes_no_rest_url_credentials(world: World, recorded_jobmanager, tmp_path: Path):
    """A REST URL with ``user:password@`` authenticates (HTTP basic) but is never published (DataHub
    ``externalUrl``, OpenLineage, JSON) nor shown; nor is a DataHub GMS URL's password."""
    env = {k: v for k, v in world.env.items() if k != "FLINK_API_TOKEN"}
    host = recorded_jobmanager.url.removeprefix("http://")
    texts = {}
    for fmt in ("json", "openlineage", "datahub"):
        out = tmp_path / f"harvest.{fmt}"
        done = lakeflow(env, "-v", "harvest", "--rest-url", f"http://admin:rest-pa55w0rd-Yt44@{host}",
                        "--format", fmt, "--output", str(out))
        assert done.returncode == 0 and out.exists(), done.stderr[-1000:]
        texts.update({**outputs(f"harvest {fmt}", done), f"harvest {fmt} output": out.read_text()})
    sent = {h.get("Authorization") for _, h in recorded_jobmanager.requests}
    assert sent == {"Basic " + base64.b64encode(b"admin:rest-pa55w0rd-Yt44").decode()}
    gms = f"127.0.0.1:{free_port()}"  # nothing listens: the error names the GMS URL
    done = lakeflow(env, "harvest", "--rest-url", recorded_jobmanager.url, "--format", "datahub", "--output",
                    str(tmp_path / "mcps.json"), "--max-retries", "0", "--datahub-gms",
                    f"http://admin:gms-pa55w0rd-Ku09@{gms}")
    assert done.returncode == 2 and f"DataHub GMS POST http://admin:***@{gms}/aspects" in done.stderr
    texts.update(outputs("harvest to a GMS", done))
    aspects = [json.loads(m["aspect"]["value"]) for m in json.loads(texts["harvest datahub output"])]
    urls = {a["externalUrl"] for a in aspects if "externalUrl" in a}
    assert urls and all(u.startswith(f"{recorded_jobmanager.url}/#/job/") for u in urls)
    secrets = Secrets()
    secrets.add("URL password", ["rest-pa55w0rd-Yt44", "gms-pa55w0rd-Ku09"])
    leaks = secrets.leaks(texts)
    assert not leaks, leaks


def test_compaction_against_lakekeeper_fails_without_showing_secrets(world: World, tmp_path: Path):
    """The raw table comes from Lakekeeper (vended credentials), the Iceberg REST catalog is missing
    from the stand-in: the run fails early — its error and files must hold no secret."""
    assert lakeflow(world.env, "register").returncode == 0
    env = {**world.env, "PYTHONPATH": str(REPO), "SPARK_LOCAL_IP": "127.0.0.1"}
    texts = {}
    for v in VERBOSITY:
        done = subprocess.run([sys.executable, "-m", "lakeflow.cli", *v, "compact", "--report",
                               str(tmp_path / "r.json")], env=env, cwd=tmp_path, capture_output=True, text=True,
                              timeout=300)
        # the stand-in serves no Iceberg REST catalog: one line naming the call its 404 failed, exit 2
        assert done.returncode == 2, done.stderr[-1000:]
        assert "compact: NotFound: open Iceberg table iot.sensor-readings-compacted" in done.stderr
        assert "Traceback" not in done.stderr, done.stderr[-1000:]
        texts.update(outputs(" ".join(["compact", *v]), done))
    secrets = world.secrets()
    leaks = secrets.leaks(texts) + secrets.file_leaks(tmp_path)
    assert not leaks, leaks


@pytest.mark.slow
def test_verbose_spark_compaction_shows_no_vended_secret(world: World, tmp_path: Path):
    """``lakeflow -v compact --engine spark`` on a raw table on S3 with vended credentials: the Spark
    session gets the table's fs.s3a keys and session token, and py4j logs every JVM command at
    DEBUG — none of it may reach the output, whether or not the run gets further (reading s3a://
    needs hadoop-aws). The Iceberg table is the embedded SQL catalog of
    tests/compaction_jobs/s3_cli.py (the stand-in has no Iceberg REST catalog)."""
    assert lakeflow(world.env, "register").returncode == 0
    settings = load_settings(world.env)
    location = LakekeeperCatalog.from_settings(settings).load(settings.namespace, settings.table,
                                                              vended=False).location
    bucket, _, prefix = location.removeprefix("s3://").partition("/")
    s3 = world.lakekeeper.warehouse.s3
    s3.client("s3").put_object(Bucket=bucket, Key=f"{prefix}/part-v-0-0.json",
                               Body=json_array(readings("run-v", 20, start_ms=1763683200000)).encode())
    env = {**world.env, "PYTHONPATH": str(REPO), "SPARK_LOCAL_IP": "127.0.0.1",
           "ICEBERG_WAREHOUSE": f"s3://{bucket}/iceberg", "ICEBERG_S3_ENDPOINT": s3.endpoint,
           "ICEBERG_S3_KEY": "iceberg-writer", "ICEBERG_S3_SECRET": "iceberg-s3cret-Nb73"}
    done = subprocess.run([sys.executable, str(REPO / "tests" / "compaction_jobs" / "s3_cli.py"), "-v", "compact",
                           "--engine", "spark", "--report", str(tmp_path / "r.json")],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert "DEBUG" in done.stderr and "[read] engine spark" in done.stderr, done.stderr[-3000:]
    assert "starting the Spark session" in done.stderr
    secrets = world.secrets()
    secrets.add("Iceberg S3 secret", ["iceberg-s3cret-Nb73"])
    assert secrets.known["vended secret key or session token"]
    leaks = secrets.leaks(outputs("compact -v --engine spark", done))
    assert not leaks, leaks


@pytest.mark.slow
def test_ingestion_and_compaction_runs_leave_no_secret_behind(world: World, tmp_path: Path):
    """Real runs (Flink MiniCluster, spark-submit) with the secrets in their environment: their
    output, Flink's and Spark's logs, the part files, checkpoints, Iceberg metadata, lineage events
    and reports hold none of them. The Lakekeeper table is on S3, which Flink cannot write here:
    that run must stop before Flink starts, also without showing a secret."""
    assert lakeflow(world.env, "register").returncode == 0
    job = [INGEST_PY, str(REPO / "jobs" / "sensor_ingest.py")]
    ingest_env = {**world.env, "NUM_RECORDS": "40", "BATCH_SIZE": "20", "BATCH_INTERVAL_MS": "300",
                  "FLINK_PLUGINS_DIR": str(tmp_path / "no-plugins")}
    on_s3 = subprocess.run(job, env=ingest_env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert on_s3.returncode == 2 and "flink-s3-fs-hadoop" in on_s3.stderr
    local = subprocess.run([*job, "--local", "--parallelism", "1"], env=ingest_env, cwd=tmp_path,
                           capture_output=True, text=True, timeout=300)
    assert local.returncode == 0, local.stderr[-2000:]
    assert (world.home / "log").is_dir()  # Flink's logs, searched below

    compaction = make_home(tmp_path / "compaction")
    write_parts(compaction.raw, readings("run-secrets", 60, start_ms=1763683200000), 20)
    compact_env = {**compaction.env, **{k: world.env[k] for k in ("OAUTH_CLIENT_SECRET", "FLINK_API_TOKEN",
                                                                   "DATAHUB_GMS_TOKEN")}}
    compact_env["TOKEN"] = world.lakekeeper.token
    done = subprocess.run([sys.executable, "-m", "lakeflow.cli", "-v", "compact", "--report",
                           str(tmp_path / "compact-report.json")], env=compact_env, cwd=compaction.home,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]

    secrets = world.secrets()
    texts = {**outputs("ingest on S3", on_s3), **outputs("ingest local", local), **outputs("compact", done)}
    leaks = secrets.leaks(texts)
    assert not leaks, leaks
    leaks = secrets.file_leaks(tmp_path)
    assert not leaks, leaks


@pytest.mark.slow
def test_cluster_up_on_s3_keeps_every_key_out_of_the_cluster(world: World, tmp_path: Path):
    """`lakeflow flink up` for an S3 table starts a real standalone cluster with keyless S3A settings and
    the command that vends each table's credentials to its own filesystem (``lakeflow-s3``) in
    config.yaml, the catalog settings that command reads in a private file. Flink logs every config.yaml
    property at start: neither its conf and logs, the daemons' environments nor the command's output
    hold a secret or a vended key; the command, run as a TaskManager runs it, vends the table's
    credentials, which write the table.

    The wheel has no flink-s3-fs-hadoop: an empty placeholder jar in a private FLINK_PLUGINS_DIR
    satisfies the plugin check (Flink starts with it and loads nothing from it); no S3 write by
    Flink happens here, the table's own filesystem writes in test_ingest_s3.py and test_fleet.py."""
    from lakeflow.ingest.storage import CREDENTIAL_COMMAND

    plugins = tmp_path / "plugins"
    (plugins / "s3-fs-hadoop").mkdir(parents=True)
    (plugins / "s3-fs-hadoop" / "flink-s3-fs-hadoop-0.jar").touch()
    home, rest_port = tmp_path / "cluster", free_port()
    env = {**world.env, "FLINK_PLUGINS_DIR": str(plugins)}
    settings = load_settings(world.env)
    vended_before = len(world.lakekeeper.vended_access_keys)
    cluster = FlinkCluster(home, secret_variable=is_secret_key)  # the one cluster-up starts: same home, so stop() finds its pids
    try:
        done = lakeflow(env, "-v", "flink", "up", "--home", str(home), "--rest-port", str(rest_port),
                        "--rpc-port", str(free_port()), timeout=240)
        assert done.returncode == 0, done.stderr[-2000:]
        overview = requests.get(f"http://localhost:{rest_port}/v1/overview", timeout=5).json()
        assert overview["taskmanagers"] >= 1 and overview["slots-total"] >= 1
        assert len(world.lakekeeper.vended_access_keys) > vended_before  # the keys kept out were real

        env_file = world.home / "aws" / "lakeflow-catalog.env"
        assert f"catalog settings for the tables' credentials in {env_file}" in done.stderr
        assert "static TOKEN" not in done.stderr  # OAuth client credentials: renewable
        config = yaml.safe_load((home / "conf" / "config.yaml").read_text())
        assert f"LAKEFLOW_ENV_FILE={env_file}" in config[CREDENTIAL_COMMAND]
        assert "fs.s3a.aws.credentials.provider" not in config and not CREDENTIAL_KEYS & set(config)
        assert stat.S_IMODE(env_file.stat().st_mode) == 0o600
        logs = "".join(p.read_text() for p in (home / "log").glob("*taskexecutor*.log"))
        assert f"Loading configuration property: {CREDENTIAL_COMMAND}, " in logs

        # the daemons start without the caller's secrets (OAUTH_CLIENT_SECRET, FLINK_API_TOKEN, …) or AWS keys
        environs = {pid: Path(f"/proc/{pid}/environ").read_text() for pid in cluster._pids()}
        assert len(environs) == 2
        leaks = world.secrets().leaks({f"environment of pid {pid}": text for pid, text in environs.items()})
        assert not leaks, leaks
        (pid,) = cluster.taskmanager_pids()
        environ = dict(e.split("=", 1) for e in environs[pid].split("\0") if "=" in e)
        assert not [k for k in environ if k.startswith("AWS_")]
        # the command, run from the TaskManager's environment as its table filesystem runs it, vends
        location = LakekeeperCatalog.from_settings(settings).load(settings.namespace, settings.table,
                                                                  vended=False).location
        bucket, _, prefix = location.removeprefix("s3://").partition("/")
        s3 = world.lakekeeper.warehouse.s3
        calls = len(world.lakekeeper.calls("GET", "/credentials"))
        probe = subprocess.run(
            [sys.executable, "-c", CREDENTIAL_PROBE, s3.endpoint, s3.region, bucket, f"{prefix}/cluster-up-probe.json",
             config[CREDENTIAL_COMMAND]],
            env=environ, capture_output=True, text=True, timeout=120)
        assert probe.returncode == 0, probe.stderr[-2000:]
        assert probe.stdout.strip() == "vended"
        assert len(world.lakekeeper.calls("GET", "/credentials")) == calls + 1
        assert s3.client("s3").head_object(Bucket=bucket, Key=f"{prefix}/cluster-up-probe.json")
    finally:
        cluster.stop()
    assert not cluster.running()

    secrets = world.secrets()
    leaks = secrets.leaks({**outputs("cluster-up", done), **outputs("credential probe", probe)})
    assert not leaks, leaks
    assert any((home / "log").glob("*standalonesession*.log"))
    leaks = secrets.file_leaks(tmp_path, allowed=[env_file])  # cluster conf/ and log/, the profile files
    assert not leaks, leaks
