"""lakeflow.runtime.jars: versions from the installed wheels, Maven fetching with verified checksums, the
offline message, the Flink plugin's installation — and, slow, the fetched jars against moto with
IAM enforced and assumed-role credentials (Spark's s3a:// and s3://, Flink's FileSink on s3://).

Unit tests: they start no process. The real-process tests: tests/integration/test_jars.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakeflow.ingest import IngestError
from lakeflow.ingest.storage import require_filesystem
from lakeflow.runtime import jars


@pytest.fixture
def jars_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "jars"
    monkeypatch.setenv("LAKEFLOW_JARS_DIR", str(folder))
    monkeypatch.delenv("LAKEFLOW_JARS_OFFLINE", raising=False)
    monkeypatch.delenv("MAVEN_REPO", raising=False)
    monkeypatch.delenv("FLINK_PLUGINS_DIR", raising=False)
    return folder


def seed(jar_set: jars.JarSet, *names: str) -> list[Path]:
    """Pre-seed a set's folder as an offline machine would (copied jars)."""
    jar_set.folder.mkdir(parents=True, exist_ok=True)
    out = []
    for name in (jar_set.key_jar, *names):
        (jar_set.folder / name).write_bytes(b"PK fake " + name.encode())
        out.append(jar_set.folder / name)
    return sorted(out)


def test_the_sets_name_their_artifacts_and_folders(jars_dir: Path) -> None:
    flink, spark = jars.flink_set(), jars.spark_set()
    assert flink.folder == jars_dir.resolve() / f"flink-{jars.flink_version()}"
    assert flink.key_jar == f"flink-s3-fs-hadoop-{jars.flink_version()}.jar"
    assert f"<version>{jars.flink_version()}</version>" in flink.pom()
    hadoop = jars.hadoop_version()
    assert spark.folder == jars_dir.resolve() / f"spark-hadoop-{hadoop}" and spark.key_jar == f"hadoop-aws-{hadoop}.jar"
    pom = spark.pom()
    assert f"<artifactId>hadoop-project</artifactId>\n    <version>{hadoop}</version>" in pom  # SDK version from it
    assert "<artifactId>bundle</artifactId>" in pom and "@" not in pom  # the 0.7 GB bundle excluded
    for module in jars.SDK_MODULES:
        assert f"<artifactId>{module}</artifactId>" in pom
    gateway = jars.sql_gateway_set()
    assert gateway.folder == jars_dir.resolve() / f"flink-sql-gateway-{jars.flink_version()}"
    assert gateway.key_jar == f"flink-sql-gateway-{jars.flink_version()}.jar"
    assert f"<version>{jars.flink_version()}</version>" in gateway.pom() and "@" not in gateway.pom()


def test_offline_the_gateway_set_names_its_make_target(jars_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAKEFLOW_JARS_OFFLINE", "1")
    with pytest.raises(jars.JarsUnavailable, match=rf"org.apache.flink:flink-sql-gateway:{jars.flink_version()}.*"
                                                   r"make sql-gateway-jar"):
        jars.sql_gateway_jar()
    seed(jars.sql_gateway_set())
    assert jars.sql_gateway_jar() == jars.sql_gateway_set().folder / jars.sql_gateway_set().key_jar


def test_offline_without_the_jars_names_artifacts_versions_and_folder(
        jars_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAKEFLOW_JARS_OFFLINE", "1")
    with pytest.raises(jars.JarsUnavailable) as err:
        jars.spark_s3_jars()
    message = str(err.value)
    hadoop = jars.hadoop_version()
    for part in (f"org.apache.hadoop:hadoop-aws:{hadoop}", "software.amazon.awssdk", "s3-transfer-manager",
                 f"{jars_dir.resolve()}/spark-hadoop-{hadoop}/", f"hadoop-aws-{hadoop}.jar", "make s3-jars",
                 "LAKEFLOW_JARS_OFFLINE"):
        assert part in message
    monkeypatch.delenv("LAKEFLOW_JARS_OFFLINE")
    monkeypatch.setenv("MVN", "no-such-mvn")
    with pytest.raises(jars.JarsUnavailable, match=rf"no Maven: MVN=no-such-mvn is not an executable.*flink-s3-fs-hadoop:"
                                                   rf"{jars.flink_version()}.*flink-{jars.flink_version()}/"):
        jars.fetch(jars.flink_set())


def test_a_pre_seeded_folder_is_used_without_maven(jars_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MVN", "no-such-mvn")
    seeded = seed(jars.spark_set(), "s3-2.0.0.jar", "sts-2.0.0.jar")
    assert jars.spark_s3_jars() == seeded


def test_the_flink_plugin_goes_into_its_own_plugin_folder(jars_dir: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MVN", "no-such-mvn")
    seed(jars.flink_set())
    plugins = tmp_path / "plugins"
    installed = jars.install_flink_plugin(plugins)
    assert installed == plugins / "s3-fs-hadoop" / jars.flink_set().key_jar
    assert installed.read_bytes() == (jars.flink_set().folder / jars.flink_set().key_jar).read_bytes()
    assert [p.name for p in installed.parent.iterdir()] == [installed.name]
    assert jars.flink_plugin_installed(plugins) == installed


def test_an_s3_table_installs_the_plugin_into_the_wheels_flink(jars_dir: Path, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("lakeflow.runtime.homes.flink_home", lambda: tmp_path / "pyflink")
    monkeypatch.setenv("LAKEFLOW_JARS_OFFLINE", "1")
    with pytest.raises(IngestError, match=r"no flink-s3-fs-hadoop plugin .* could not be fetched: .*make s3-jars"):
        require_filesystem("s3://bucket/warehouse/iot/readings")
    seed(jars.flink_set())
    require_filesystem("s3://bucket/warehouse/iot/readings")
    assert (tmp_path / "pyflink" / "plugins" / "s3-fs-hadoop" / jars.flink_set().key_jar).is_file()


def test_a_plugins_dir_of_your_own_is_not_written_implicitly(jars_dir: Path, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLINK_PLUGINS_DIR", str(tmp_path / "plugins"))
    seed(jars.flink_set())
    with pytest.raises(IngestError, match=r"no flink-s3-fs-hadoop plugin .*FLINK_PLUGINS_DIR.*make flink-plugins"):
        require_filesystem("s3a://bucket/warehouse/iot/readings")
    assert not (tmp_path / "plugins").exists()
