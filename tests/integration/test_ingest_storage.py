"""Ingestion building blocks without Flink: sensor model and SQL text, settings → Flink
configuration, the S3 plugin check and installer, and reading committed part files.

The unit tests (no process): tests/unit/test_ingest.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lakeflow.credentials import VendedConfig, to_s3a
from lakeflow.ingest import IngestError
from lakeflow.ingest.progress import PartFiles
from lakeflow.runtime.jars import flink_version
from tests.unit.test_ingest import START, part  # noqa: F401 (fixtures, constants)


def test_a_cluster_for_an_s3_table_gets_keyless_settings_and_the_credential_command(
        lakekeeper, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import stat

    import yaml

    from lakeflow.aws_profile import CREDENTIAL_KEYS
    from lakeflow.ingest.storage import CREDENTIAL_COMMAND, cluster_storage
    from lakeflow.runtime.flink_cluster import FlinkCluster
    from lakeflow.secret import is_secret_key
    from tests.support.fixtures_lakekeeper import settings_for as lakekeeper_settings

    monkeypatch.setenv("FLINK_PLUGINS_DIR", str(tmp_path / "plugins"))
    settings = lakekeeper_settings(lakekeeper, LAKEFLOW_HOME=str(tmp_path))
    with pytest.raises(IngestError, match="make flink-plugins"):
        cluster_storage(settings, tmp_path / "aws")
    assert not (tmp_path / "aws").exists()
    jar = tmp_path / "plugins" / "s3-fs-hadoop" / f"flink-s3-fs-hadoop-{flink_version()}.jar"
    jar.parent.mkdir(parents=True)
    jar.write_bytes(b"PK")
    storage = cluster_storage(settings, tmp_path / "aws")
    assert storage.handle.location.startswith("s3://") and lakekeeper.vended_access_keys
    assert "fs.s3a.aws.credentials.provider" not in storage.conf  # each table's filesystem has its own
    assert storage.conf["fs.s3a.endpoint"] == lakekeeper.warehouse.s3.endpoint.rstrip("/")
    assert not CREDENTIAL_KEYS & set(storage.conf)
    env_file = (tmp_path / "aws" / "lakeflow-catalog.env").resolve()
    assert f"LAKEFLOW_ENV_FILE={env_file}" in storage.conf[CREDENTIAL_COMMAND]
    assert f"TOKEN='{lakekeeper.token}'" in env_file.read_text() and stat.S_IMODE(env_file.stat().st_mode) == 0o600
    assert (jar.parent / "lakeflow-flink.jar").is_file()  # the lakeflow-s3 filesystem beside the S3 plugin
    cluster = FlinkCluster(tmp_path / "cluster", conf=storage.conf, secret_variable=is_secret_key)
    cluster.write_conf()
    written = cluster.conf_dir / "config.yaml"
    assert stat.S_IMODE(written.stat().st_mode) == 0o600
    text = written.read_text()
    assert yaml.safe_load(text)[CREDENTIAL_COMMAND] == storage.conf[CREDENTIAL_COMMAND]
    for secret in lakekeeper.vended_secrets + lakekeeper.vended_access_keys + [lakekeeper.token]:
        assert secret not in text


def test_a_cluster_for_an_s3_table_without_vended_keys_gets_no_profile(
        lakekeeper, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """STS off: the cluster's processes use their own AWS credentials, as before."""
    from lakeflow.ingest.storage import cluster_storage
    from tests.support.fixtures_lakekeeper import settings_for as lakekeeper_settings

    lakekeeper.warehouse.sts_enabled = False
    jar = tmp_path / "plugins" / "s3-fs-hadoop" / "flink-s3-fs-hadoop-0.jar"
    jar.parent.mkdir(parents=True)
    jar.touch()
    monkeypatch.setenv("FLINK_PLUGINS_DIR", str(jar.parent.parent))
    storage = cluster_storage(lakekeeper_settings(lakekeeper, LAKEFLOW_HOME=str(tmp_path)), tmp_path / "aws")
    assert not (tmp_path / "aws").exists() and "lakeflow.fs.credential-command" not in storage.conf
    assert "fs.s3a.aws.credentials.provider" not in storage.conf and storage.conf["fs.s3a.endpoint"]


def test_cluster_up_prints_the_catalog_settings_file_and_the_static_token_note(
        lakekeeper, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    """The command's wiring, with the start replaced by writing the configuration (the real
    cluster: tests/integration/test_secrets.py)."""
    from lakeflow.cli.main import main
    from lakeflow.runtime.flink_cluster import FlinkCluster
    from tests.support.fixtures_lakekeeper import env_for

    for key, value in env_for(lakekeeper, LAKEFLOW_HOME=str(tmp_path / "home")).items():
        monkeypatch.setenv(key, value)
    jar = tmp_path / "plugins" / "s3-fs-hadoop" / "flink-s3-fs-hadoop-0.jar"
    jar.parent.mkdir(parents=True)
    jar.touch()
    monkeypatch.setenv("FLINK_PLUGINS_DIR", str(jar.parent.parent))
    started: list[FlinkCluster] = []
    monkeypatch.setattr(FlinkCluster, "start", lambda self, timeout=90.0: started.append(self) or self.write_conf())
    assert main(["flink", "up", "--home", str(tmp_path / "cluster"), "--rest-port", "1"]) == 0
    out, err = capsys.readouterr()
    catalog_env = tmp_path / "home" / "aws" / "lakeflow-catalog.env"
    assert f"catalog settings for the tables' credentials in {catalog_env}" in err
    assert "note: a static TOKEN cannot be renewed" in err
    assert out.startswith("Flink cluster up: http://localhost:1 ") and "each S3 table through its own filesystem" in out
    assert "AWS_PROFILE" not in started[0].env()
    config = (tmp_path / "cluster" / "conf" / "config.yaml").read_text()
    assert f"LAKEFLOW_ENV_FILE={catalog_env}" in config and "fs.s3a.access.key" not in config
    for secret in lakekeeper.vended_secrets + lakekeeper.vended_access_keys + [lakekeeper.token]:
        assert secret not in out + err + config


def test_part_files_on_s3(moto_server) -> None:
    s3 = moto_server.client("s3")
    s3.create_bucket(Bucket="lake")
    for key, body in (("readings/2026-11-21--10/part-x-0-0.json", part([{"a": 1}, {"a": 2}])),
                      ("readings/2026-11-21--10/.part-x-0-1.json.inprogress.1", b"["),
                      ("readings/2026-11-21--09/part-old-0-0.json", part([{"a": 1}])),    # before the run
                      ("readings/part-flat-0-0.json", part([{"a": 1}])),
                      ("readings/_lakeflow/2026-11-21--10/part-z-0-0.json", part([{"a": 1}])),
                      ("readings-other/2026-11-21--10/part-y-0-0.json", part([{"a": 1}]))):
        s3.put_object(Bucket="lake", Key=f"wh/iot/{key}", Body=body)
    s3a = to_s3a(VendedConfig("s3://lake/wh/iot/readings", {
        "s3.access-key-id": "AKIA", "s3.secret-access-key": "s3cr3t", "s3.endpoint": moto_server.url,
        "s3.region": "us-east-1", "s3.path-style-access": "true"}))
    listing = PartFiles("s3://lake/wh/iot/readings/", s3a, since=START).scan()
    assert {n: f.records for n, f in listing.committed.items()} == {"2026-11-21--10/part-x-0-0.json": 2}
    assert listing.uncommitted == ("2026-11-21--10/.part-x-0-1.json.inprogress.1",)


def test_a_cluster_for_a_pipeline_of_topic_patterns_alone_takes_a_table_of_theirs(tmp_path: Path) -> None:
    """No stray table: with only topic patterns the cluster's storage comes from one of their registered
    tables, and before any is registered the refusal says what to do."""
    from lakeflow.catalog import open_catalog
    from lakeflow.ingest.storage import cluster_storage
    from lakeflow.settings import load_settings
    from tests.unit.test_streams import ISSUE_TOML, pipeline

    only_meters = ISSUE_TOML.split("[[streams]]")[0] + "[[streams]]" + ISSUE_TOML.split("[[streams]]")[2]
    pipeline(tmp_path, only_meters)
    settings = load_settings({"PIPELINE": str(tmp_path / "pipeline.toml"), "LAKEFLOW_HOME": str(tmp_path / "home")},
                             env_file=tmp_path / "none.env")
    with pytest.raises(IngestError, match="none of its topic patterns' tables is registered yet"):
        cluster_storage(settings, tmp_path / "aws")
    with open_catalog(settings) as catalog:
        assert catalog.list_tables(("plant",)) == []
        catalog.register(("plant",), "unrelated")
        catalog.register(("plant",), "meters_hall2")
    storage = cluster_storage(settings, tmp_path / "aws")
    assert storage.handle.ident.name == "meters_hall2"
    with open_catalog(settings) as catalog:
        assert sorted(t.name for t in catalog.list_tables(("plant",))) == ["meters_hall2", "unrelated"]
