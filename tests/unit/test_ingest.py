"""Ingestion building blocks without Flink: the settings → Flink configuration and job parameters, the
S3 plugin check and installer, and reading committed part files. The synthetic sensors' generator:
tests/unit/test_ingest_generator.py.

Unit tests: they start no process. The real-process tests: tests/integration/test_ingest_storage.py."""

from __future__ import annotations

import json
import logging
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from lakeflow.catalog.base import TableHandle, TableIdent
from lakeflow.catalog.local import LocalCatalog
from lakeflow.credentials import VendedConfig
from lakeflow.ingest import IngestError
from lakeflow.ingest.job import FOREVER, PARAM_SCHEMA_DIGEST, PARAM_SCHEMA_TITLE, IngestJob, TableWrite
from lakeflow.streams import load_pipeline
from lakeflow.ingest.progress import PartFiles, ProgressWatcher, records_in
from lakeflow.ingest.storage import require_filesystem
from lakeflow.lineage import datasets
from lakeflow.readings import bucket_name
from lakeflow.runtime.jars import JarsUnavailable, flink_version, install_flink_plugin
from lakeflow.settings import load_settings


def settings_for(tmp_path: Path, **env: str):
    return load_settings({"LAKEFLOW_HOME": str(tmp_path / "home"), **env}, env_file=tmp_path / "none.env")


def writes(settings, handle: TableHandle) -> list[TableWrite]:
    """The settings' one stream into ``handle``'s table."""
    return [TableWrite.of(load_pipeline(settings).streams()[0], handle)]


def plan(tmp_path: Path, **env: str) -> IngestJob:
    settings = settings_for(tmp_path, **env)
    handle = LocalCatalog(settings.home).register(settings.namespace, settings.table)
    return IngestJob.plan(settings, writes(settings, handle))


def test_flink_configuration_follows_the_settings(tmp_path: Path) -> None:
    job = plan(tmp_path, BATCH_INTERVAL_MS="2500", BATCH_SIZE="50", NUM_RECORDS="1000", NUM_SENSORS="7")
    conf = job.flink_configuration(local=True)
    assert conf["execution.checkpointing.interval"] == "2500 ms"
    assert conf["execution.checkpointing.mode"] == "EXACTLY_ONCE"
    assert conf["execution.checkpointing.storage"] == "filesystem"
    assert conf["execution.checkpointing.dir"] == (tmp_path / "home" / "checkpoints").resolve().as_uri()
    assert conf["restart-strategy.type"] == "exponential-delay"
    assert conf["python.executable"].endswith("python") and conf["python.client.executable"] == conf["python.executable"]
    assert conf["rest.bind-address"] == "localhost" and conf["rest.port"] == "0"
    assert "parallelism.default" not in conf
    assert "rest.port" not in job.flink_configuration(local=False)  # the CLI's cluster decides
    assert job.rows_per_second == pytest.approx(20.0)
    assert job.count == 1000 and job.bounded and job.num_sensors == 7


def test_unbounded_and_unthrottled_jobs(tmp_path: Path) -> None:
    job = plan(tmp_path, NUM_RECORDS="-1")
    assert not job.bounded and job.count == FOREVER
    settings = settings_for(tmp_path)
    handle = LocalCatalog(tmp_path / "home").load(("iot",), "sensor-readings")
    assert IngestJob.plan(settings, writes(settings, handle), throttled=False, parallelism=2).rows_per_second == 0.0


def test_each_plan_is_a_new_run(tmp_path: Path) -> None:
    assert plan(tmp_path).run_id != plan(tmp_path).run_id


def test_job_declares_the_table_identity_for_lineage(tmp_path: Path) -> None:
    job = plan(tmp_path, NAMESPACE="iot.raw", TABLE="readings")
    params, (table,) = job.job_parameters(), job.tables
    assert params[datasets.PARAM_CATALOG] == "local"
    assert params[datasets.PARAM_CATALOG_URI] == (tmp_path / "home").resolve().as_uri()
    assert params[datasets.PARAM_WAREHOUSE] == "local"
    assert params[datasets.PARAM_NAMESPACE] == "iot.raw" and params[datasets.PARAM_TABLE] == "readings"
    assert params[datasets.PARAM_LOCATION] == table.location and table.location.startswith("file:///")
    assert params[datasets.PARAM_FORMAT] == "dataset" and params[datasets.PARAM_RUN_ID] == job.run_id
    assert table.sink_name == f"LakeflowSink[{table.location}]"
    assert datasets.from_location(table.location).name.endswith("/iot/raw/readings")
    assert (params[PARAM_SCHEMA_TITLE], params[PARAM_SCHEMA_DIGEST]) == ("sensor-reading", table.schema.digest)


def test_the_job_takes_the_declared_schema_from_the_settings(tmp_path: Path) -> None:
    declared = tmp_path / "vibration.schema.json"
    declared.write_text(json.dumps({
        "title": "vibration", "type": "object", "required": ["device_id", "at"],
        "properties": {"device_id": {"type": "string"}, "at": {"type": "string", "format": "date-time"},
                       "accel": {"type": "array", "items": {"type": "number"}}}}))
    job = plan(tmp_path, TABLE_SCHEMA=str(declared), KEY_FIELDS="device_id,at")
    schema = job.tables[0].schema
    assert (schema.names, schema.event_time, schema.key) == (("device_id", "at", "accel"), "at",
                                                                         ("device_id", "at"))
    params = job.job_parameters()
    assert params[PARAM_SCHEMA_TITLE] == "vibration" and len(params[PARAM_SCHEMA_DIGEST]) == 12
    assert params[PARAM_SCHEMA_DIGEST] != plan(tmp_path).job_parameters()[PARAM_SCHEMA_DIGEST]


def test_no_secret_reaches_the_job_configuration(tmp_path: Path) -> None:
    settings = settings_for(tmp_path, LAKEKEEPER="http://127.0.0.1:8181", WAREHOUSE_ID="wh", TOKEN="tok-s3cr3t")
    handle = TableHandle(TableIdent("0b7a…", ("iot",), "sensor-readings"), "s3://lake/wh/iot/sensor-readings",
                         storage=VendedConfig("s3://lake/wh/iot/sensor-readings", {
                             "s3.access-key-id": "AKIAEXAMPLE", "s3.secret-access-key": "key-s3cr3t",
                             "s3.session-token": "sts-s3cr3t"}))
    job = IngestJob.plan(settings, writes(settings, handle))
    shown = json.dumps([job, job.flink_configuration(local=True), job.flink_configuration(local=False),
                        job.job_parameters()], default=repr)
    assert "s3cr3t" not in shown and "AKIAEXAMPLE" not in shown and "fs.s3a" not in shown
    assert job.job_parameters()[datasets.PARAM_CATALOG_URI] == "http://127.0.0.1:8181"


def test_file_locations_need_nothing_and_other_schemes_are_refused() -> None:
    require_filesystem("file:///tmp/x")
    with pytest.raises(IngestError, match="expected file:// or s3://"):
        require_filesystem("gs://bucket/x")


def test_s3_without_the_plugin_fails_before_submitting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLINK_PLUGINS_DIR", str(tmp_path / "plugins"))
    with pytest.raises(IngestError, match=r"no flink-s3-fs-hadoop plugin .*make flink-plugins"):
        require_filesystem("s3://bucket/warehouse/iot/readings")
    jar = tmp_path / "plugins" / "s3-fs-hadoop" / f"flink-s3-fs-hadoop-{flink_version()}.jar"
    jar.parent.mkdir(parents=True)
    jar.write_bytes(b"PK")
    require_filesystem("s3a://bucket/warehouse/iot/readings")


def test_plugin_is_copied_from_flink_home_opt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`make flink-plugins` (lakeflow jars flink) with FLINK_HOME set copies the plugin from
    that distribution's opt/ instead of fetching it."""
    monkeypatch.setenv("FLINK_PLUGINS_DIR", str(tmp_path / "plugins"))
    monkeypatch.setenv("FLINK_HOME", str(tmp_path / "flink"))
    opt = tmp_path / "flink" / "opt"
    with pytest.raises(JarsUnavailable, match="should be a Flink .* distribution"):
        install_flink_plugin()
    opt.mkdir(parents=True)
    (opt / f"flink-s3-fs-hadoop-{flink_version()}.jar").write_bytes(b"jar bytes")
    installed = install_flink_plugin()
    assert installed == tmp_path / "plugins" / "s3-fs-hadoop" / f"flink-s3-fs-hadoop-{flink_version()}.jar"
    assert installed.read_bytes() == b"jar bytes"


def test_cluster_up_hands_the_lineage_endpoint_to_the_listener_and_its_key_to_the_environment(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    from lakeflow.cli.main import main
    from lakeflow.runtime.flink_cluster import FlinkCluster

    home = tmp_path / "home"
    monkeypatch.setenv("LAKEFLOW_HOME", str(home))
    monkeypatch.setenv("OPENLINEAGE_API_KEY", "ol-secret-key-123")
    started: list[FlinkCluster] = []
    monkeypatch.setattr(FlinkCluster, "start", lambda self, timeout=90.0: started.append(self) or self.write_conf())
    args = ["flink", "up", "--home", str(tmp_path / "cluster"), "--rest-port", "1",
            "--openlineage-url", "https://datahub.example.com:8443/", "--openlineage-endpoint",
            "openapi/openlineage/api/v1/lineage"]
    assert main(args) == 0
    out, err = capsys.readouterr()
    config = (tmp_path / "cluster" / "conf" / "config.yaml").read_text()
    assert "lakeflow.lineage.url: https://datahub.example.com:8443/openapi/openlineage/api/v1/lineage" in config
    assert started[0].env()["OPENLINEAGE_API_KEY"] == "ol-secret-key-123"
    assert f"into {home / 'lineage'} and to https://datahub.example.com:8443/openapi/openlineage" in out
    assert "ol-secret-key-123" not in out + err + config
    assert main([*args, "--no-native-lineage"]) == 2
    assert "--openlineage-url needs the lineage listener" in capsys.readouterr().err
    assert main([*args[:-3], "https://me:pw@datahub.example.com/"]) == 2  # Flink's REST API shows its config
    out, err = capsys.readouterr()
    assert "must not hold a user or password" in err and "pw" not in out + err.replace("password", "")


def test_a_cluster_for_a_local_table_needs_no_storage_settings(tmp_path: Path) -> None:
    from lakeflow.ingest.storage import cluster_storage

    storage = cluster_storage(settings_for(tmp_path), tmp_path / "aws")
    assert storage.handle.location.startswith("file://") and storage.conf == {}
    assert not (tmp_path / "aws").exists()


def part(records: list[dict]) -> bytes:
    """A part file as JsonArrayWriterFactory writes it."""
    return ("[" + ",\n".join(json.dumps(r) for r in records) + "]\n").encode()


def test_records_are_counted_per_line() -> None:
    assert records_in(part([{"a": 1}])) == 1
    assert records_in(part([{"a": i} for i in range(7)])) == 7
    assert records_in(b"[]") == 0


START = datetime(2026, 11, 21, 10, 20, tzinfo=timezone.utc)  # a run starting in bucket 2026-11-21--10


HOUR = timedelta(hours=1)


def put(root: Path, rel: str, data: bytes) -> None:
    (root / rel).parent.mkdir(parents=True, exist_ok=True)
    (root / rel).write_bytes(data)


def test_listing_separates_committed_from_in_progress_files_in_the_runs_buckets(tmp_path: Path) -> None:
    put(tmp_path, "2026-11-21--10/part-a-0-0.json", part([{"a": 1}, {"a": 2}]))
    put(tmp_path, "2026-11-21--10/.part-a-0-1.json.inprogress.0f3c", b"[{\"a\":3}")
    put(tmp_path, "2026-11-21--11/part-a-1-0.json", part([{"a": 4}]))
    put(tmp_path, "2026-11-21--10/_SUCCESS", b"")
    put(tmp_path, "2026-11-21--09/part-old-0-0.json", part([{"a": 0}]))  # before the run: not listed
    put(tmp_path, "part-flat-0-0.json", part([{"a": 0}]))                # the layout before buckets
    put(tmp_path, "_lakeflow/segments/r/2026-11-21--10.json", b"[]")     # the compaction's, not a bucket
    listing = PartFiles(tmp_path.as_uri(), since=START).scan()
    assert {n: f.records for n, f in listing.committed.items()} == {
        "2026-11-21--10/part-a-0-0.json": 2, "2026-11-21--11/part-a-1-0.json": 1}
    assert listing.uncommitted == ("2026-11-21--10/.part-a-0-1.json.inprogress.0f3c",)
    assert PartFiles(tmp_path.as_uri(), since=START + HOUR).first_bucket == "2026-11-21--11"
    assert PartFiles(tmp_path.as_uri(), since=START - PartFiles.CLOCK_SKEW).first_bucket == "2026-11-21--09"


def test_watcher_logs_each_commit_and_sums_only_this_run(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    now = bucket_name(datetime.now(timezone.utc))
    put(tmp_path, f"{now}/part-old-0-0.json", part([{"a": 0}]))
    watcher = ProgressWatcher([PartFiles(tmp_path.as_uri())], poll_s=60)
    caplog.set_level(logging.INFO, logger="lakeflow.ingest.progress")
    put(tmp_path, f"{now}/part-new-0-0.json", part([{"a": 1}, {"a": 2}]))
    put(tmp_path, f"{now}/part-new-1-0.json", part([{"a": 3}]))
    watcher.poll()
    put(tmp_path, f"{bucket_name(datetime.now(timezone.utc) + HOUR)}/part-new-0-1.json", part([{"a": 4}]))
    (summary,) = watcher.start().stop()
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2 and "2 file(s), 3 readings" in lines[0] and "1 file(s), 1 readings" in lines[1]
    assert (summary.files, summary.records, summary.uncommitted) == (3, 4, ())
    assert str(summary).startswith("3 files, 4 readings") and tmp_path.as_uri() in str(summary)
