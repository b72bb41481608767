"""lakeflow.runtime.maven: which Maven runs ($MVN, mvn on PATH, else the distribution fetched from
Maven Central), the checksum of the project's own file, the offline message — and, slow, the real
apache-maven tarball from Maven Central, verified, unpacked and run."""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import tarfile
from pathlib import Path

import pytest

from lakeflow.runtime import maven

VERSION = "9.9.9"


def _repository(root: Path, version: str = VERSION, extra: tarfile.TarInfo | None = None) -> tuple[str, str]:
    """A Maven repository on disk holding one apache-maven-<version>-bin.tar.gz (``bin/mvn`` a shell
    script printing its version): its file:// URL and the tarball's SHA-512."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        script = f"#!/bin/sh\necho 'Apache Maven {version} (stand-in)'\n".encode()
        for name, data, mode in ((f"apache-maven-{version}/bin/mvn", script, 0o755),
                                 (f"apache-maven-{version}/lib/maven-core.jar", b"PK", 0o644)):
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), mode
            archive.addfile(info, io.BytesIO(data))
        if extra is not None:
            archive.addfile(extra)
    folder = root / "org" / "apache" / "maven" / "apache-maven" / version
    folder.mkdir(parents=True)
    (folder / f"apache-maven-{version}-bin.tar.gz").write_bytes(buffer.getvalue())
    return root.as_uri(), hashlib.sha512(buffer.getvalue()).hexdigest()


def _checksums(tmp_path: Path, sha512: str, version: str = VERSION) -> Path:
    path = tmp_path / "apache-maven-bin.sha512"
    path.write_text(f"{sha512}  apache-maven-{version}-bin.tar.gz\n")
    return path


@pytest.fixture
def no_mvn(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A PATH with no mvn (only sh, which the stand-in's script runs on), no MVN, online."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sh").symlink_to("/bin/sh")
    monkeypatch.setenv("PATH", str(bin_dir))
    for name in ("MVN", "MAVEN_REPO", "LAKEFLOW_JARS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)


def test_the_project_pins_a_version_and_its_sha512() -> None:
    version, sha512 = maven.pinned()
    assert version == "3.9.16" and len(sha512) == 128
    assert maven.distribution_url(version, "https://repo.example/maven2/") == (
        "https://repo.example/maven2/org/apache/maven/apache-maven/3.9.16/apache-maven-3.9.16-bin.tar.gz")


def test_without_mvn_on_path_the_distribution_is_fetched_once(tmp_path: Path, no_mvn: None,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    repo, sha512 = _repository(tmp_path / "repo")
    monkeypatch.setenv("MAVEN_REPO", repo)
    cache, checksums = tmp_path / "cache", _checksums(tmp_path, sha512)
    found = maven.mvn(cache, checksums)
    assert found == str(cache / f"apache-maven-{VERSION}" / "bin" / "mvn")
    assert subprocess.run([found], capture_output=True, text=True, check=True).stdout == (
        f"Apache Maven {VERSION} (stand-in)\n")
    assert sorted(p.name for p in cache.iterdir()) == [f"apache-maven-{VERSION}"]  # no download left behind
    (tmp_path / "repo" / "org").rename(tmp_path / "gone")  # the repository is gone: the cache answers
    assert maven.mvn(cache, checksums) == found


def test_a_tarball_of_another_checksum_is_refused_and_nothing_cached(tmp_path: Path, no_mvn: None) -> None:
    repo, sha512 = _repository(tmp_path / "repo")
    cache = tmp_path / "cache"
    wrong = _checksums(tmp_path, "0" * 128)
    with pytest.raises(maven.MavenUnavailable, match=r"SHA-512 [0-9a-f]{16}… is not the one in .*; refused"):
        maven.install(cache, wrong, repo)
    assert list(cache.iterdir()) == []


def test_an_archive_reaching_outside_its_folder_is_refused(tmp_path: Path, no_mvn: None) -> None:
    link = tarfile.TarInfo(f"apache-maven-{VERSION}/lib/escape")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
    repo, sha512 = _repository(tmp_path / "repo", extra=link)
    with pytest.raises(maven.MavenUnavailable, match=r"unexpected archive member 'apache-maven-9.9.9/lib/escape'"):
        maven.install(tmp_path / "cache", _checksums(tmp_path, sha512), repo)


def test_mvn_on_path_or_named_by_mvn_wins(tmp_path: Path, no_mvn: None, monkeypatch: pytest.MonkeyPatch) -> None:
    on_path = tmp_path / "bin" / "mvn"
    on_path.write_text("#!/bin/sh\n")
    on_path.chmod(0o755)
    checksums = _checksums(tmp_path, "0" * 128)  # never downloaded: a fetch would fail
    assert maven.mvn(tmp_path / "cache", checksums) == str(on_path)
    monkeypatch.setenv("MVN", "no-such-mvn")
    with pytest.raises(maven.MavenUnavailable, match=r"^MVN=no-such-mvn is not an executable on PATH"):
        maven.mvn(tmp_path / "cache", checksums)


def test_offline_without_mvn_says_how_to_get_it(tmp_path: Path, no_mvn: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAKEFLOW_JARS_OFFLINE", "1")
    with pytest.raises(maven.MavenUnavailable, match=r"no mvn on PATH and LAKEFLOW_JARS_OFFLINE is set.*make maven"):
        maven.mvn(tmp_path / "cache", _checksums(tmp_path, "0" * 128))
    assert not (tmp_path / "cache").exists()


def test_an_unreachable_repository_is_one_message(tmp_path: Path, no_mvn: None) -> None:
    missing = (tmp_path / "nowhere").as_uri()
    with pytest.raises(maven.MavenUnavailable, match=rf"cannot download Maven {VERSION} from {missing}/org/apache/"
                                                     r"maven/apache-maven/9.9.9/.*make maven"):
        maven.install(tmp_path / "cache", _checksums(tmp_path, "0" * 128), missing)


@pytest.mark.slow
def test_the_real_distribution_from_maven_central_runs(tmp_path: Path) -> None:
    """The pinned tarball, downloaded from Maven Central (or $MAVEN_REPO), matches the project's
    SHA-512 and its mvn runs on the machine's JDK."""
    version, _ = maven.pinned()
    found = maven.install(tmp_path / "cache")
    done = subprocess.run([str(found), "-v"], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    assert f"Apache Maven {version}" in done.stdout
