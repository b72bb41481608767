"""Files holding secrets are private from their first byte: created 0600 (exclusively, beside the
target, then renamed over it), never written first and chmod-ed after; a file that was readable by
others before a secret goes into it is private after."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from lakeflow.aws_profile import write_profile
from lakeflow.runtime.flink_cluster import FlinkCluster
from lakeflow.secret import is_secret_key
from lakeflow.runtime.files import write_private
from lakeflow.stack import write_env


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def open_umask():
    """A umask that lets every created file be world-readable unless its creator says otherwise."""
    old = os.umask(0)
    yield
    os.umask(old)


def test_write_private_creates_0600_and_makes_an_existing_file_private(tmp_path, open_umask):
    new, old = tmp_path / "new.env", tmp_path / "old.env"
    write_private(new, "TOKEN=t0ken\n")
    old.write_text("NUM_SENSORS=7\n")
    old.chmod(0o644)
    write_private(old, "TOKEN=t0ken\n")
    assert (mode(new), mode(old)) == (0o600, 0o600)
    assert old.read_text() == "TOKEN=t0ken\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new.env", "old.env"]  # no temp file left


def test_env_local_becomes_private_when_a_secret_is_written(tmp_path, open_umask):
    env_local = tmp_path / ".env.local"
    env_local.write_text("# mine\nTOKEN=old-static-token\nNUM_SENSORS=7\n")
    env_local.chmod(0o644)
    write_env(env_local, {"TOKEN": "", "OAUTH_CLIENT_SECRET": "s3cr3t", "NAMESPACE": "iot"})
    assert mode(env_local) == 0o600
    assert env_local.read_text() == "# mine\nTOKEN=\nNUM_SENSORS=7\nOAUTH_CLIENT_SECRET=s3cr3t\nNAMESPACE=iot\n"
    fresh = tmp_path / "fresh.env"
    write_env(fresh, {"OAUTH_CLIENT_SECRET": "s3cr3t"})
    assert mode(fresh) == 0o600 and fresh.read_text() == "OAUTH_CLIENT_SECRET=s3cr3t\n"


def test_profile_files_are_private_despite_a_stale_temp_file(tmp_path, open_umask):
    """A temp file left by an earlier run (a crash, the same pid in another container) must not
    lend its mode to the profile files."""
    folder = tmp_path / "aws"
    folder.mkdir()
    for name in ("credentials", "lakeflow.iot.t.env"):
        stale = folder / f".{name}.{os.getpid()}.tmp"
        stale.write_text("")
        stale.chmod(0o644)
    profile = write_profile(folder, ("iot",), "t", {"TOKEN": "t0ken"})
    assert mode(profile.credentials_file) == mode(profile.env_file) == 0o600


def test_flink_config_becomes_private(tmp_path, open_umask):
    cluster = FlinkCluster(tmp_path / "cluster", conf={"fs.s3a.secret.key": "s3cr3t"}, secret_variable=is_secret_key)
    cluster.conf_dir.mkdir(parents=True)
    (cluster.conf_dir / "config.yaml").write_text("rest.port: 1\n")
    (cluster.conf_dir / "config.yaml").chmod(0o644)
    cluster.write_conf()
    assert mode(cluster.conf_dir / "config.yaml") == 0o600
    assert "s3cr3t" in (cluster.conf_dir / "config.yaml").read_text()
