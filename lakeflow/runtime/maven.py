"""Apache Maven, which fetches the jar sets (:mod:`lakeflow.runtime.jars`) and the tests' servers' jars:
``$MVN`` if set, else ``mvn`` on PATH, else Maven's binary distribution from Maven Central
(``org/apache/maven/apache-maven/<version>/apache-maven-<version>-bin.tar.gz``; ``$MAVEN_REPO``
replaces Maven Central), unpacked once into ``build/maven/apache-maven-<version>/``.

The version and the tarball's SHA-512 are the project's own, in
``build-support/maven/apache-maven-bin.sha512`` (``sha512sum`` format): a download that does not
match is refused and nothing is cached. Maven runs on the JDK lakeflow needs anyway, so a machine
with Python 3.11 and a JDK needs no system package for it. ``LAKEFLOW_JARS_OFFLINE=1`` never
downloads. Command line: ``python -m lakeflow.runtime.maven`` (``make maven``) prints the ``mvn``
it uses, fetching it first when needed.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import sys
import tarfile
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CHECKSUM_FILE = REPO / "build-support" / "maven" / "apache-maven-bin.sha512"
CACHE = REPO / "build" / "maven"
MAVEN_CENTRAL = "https://repo.maven.apache.org/maven2"
DOWNLOAD_TIMEOUT_S = 300.0


class MavenUnavailable(RuntimeError):
    """No Maven to run: the message says what was tried and what to do."""


def pinned(checksum_file: Path = CHECKSUM_FILE) -> tuple[str, str]:
    """The Maven version and the SHA-512 of its ``-bin.tar.gz``, from the project's checksum file."""
    found = re.fullmatch(r"([0-9a-f]{128})\s+\*?apache-maven-(\S+)-bin\.tar\.gz\s*", checksum_file.read_text())
    if not found:
        raise ValueError(f"{checksum_file}: expected one line '<sha512>  apache-maven-<version>-bin.tar.gz'")
    return found.group(2), found.group(1)


def distribution_url(version: str, repo: str | None = None) -> str:
    base = (repo or os.environ.get("MAVEN_REPO") or MAVEN_CENTRAL).rstrip("/")
    return f"{base}/org/apache/maven/apache-maven/{version}/apache-maven-{version}-bin.tar.gz"


def cached_mvn(cache: Path = CACHE, checksum_file: Path = CHECKSUM_FILE) -> Path:
    """Where the fetched distribution's ``mvn`` is (or will be)."""
    version, _ = pinned(checksum_file)
    return cache / f"apache-maven-{version}" / "bin" / "mvn"


def install(cache: Path = CACHE, checksum_file: Path = CHECKSUM_FILE, repo: str | None = None) -> Path:
    """Download the pinned distribution, check its SHA-512, unpack it into ``cache``; its ``mvn``."""
    version, sha512 = pinned(checksum_file)
    target = cached_mvn(cache, checksum_file)
    if target.is_file():
        return target
    url = distribution_url(version, repo)
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache, prefix=".fetch-") as tmp:
        tarball = Path(tmp) / "maven.tar.gz"
        digest = hashlib.sha512()
        try:
            with urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT_S) as answer, tarball.open("wb") as out:
                while chunk := answer.read(1 << 20):
                    digest.update(chunk)
                    out.write(chunk)
        except (urllib.error.URLError, OSError) as exc:
            raise MavenUnavailable(f"cannot download Maven {version} from {url}: {exc}. {_install_hint()}") from None
        if digest.hexdigest() != sha512:
            raise MavenUnavailable(
                f"{url}: SHA-512 {digest.hexdigest()[:16]}… is not the one in {checksum_file} "
                f"({sha512[:16]}…); refused, nothing cached"
            )
        unpacked = Path(tmp) / "unpacked"
        with tarfile.open(tarball) as archive:
            members = archive.getmembers()
            for member in members:  # files and folders below the archive's own, nothing else
                parts = Path(member.name).parts
                if member.name.startswith("/") or ".." in parts or not (member.isfile() or member.isdir()):
                    raise MavenUnavailable(f"{url}: unexpected archive member {member.name!r}; refused")
            archive.extractall(unpacked, members=members)
        home = unpacked / f"apache-maven-{version}"
        if not (home / "bin" / "mvn").is_file():
            raise MavenUnavailable(f"{url}: no apache-maven-{version}/bin/mvn in the archive")
        if not target.is_file():  # another process may have finished first
            home.rename(target.parents[1])
    return target


def mvn(cache: Path = CACHE, checksum_file: Path = CHECKSUM_FILE) -> str:
    """The Maven to run: ``$MVN``, else ``mvn`` on PATH, else the fetched distribution (fetched now
    unless ``LAKEFLOW_JARS_OFFLINE`` is set)."""
    named = os.environ.get("MVN")
    if named:
        found = shutil.which(named)
        if found is None:
            raise MavenUnavailable(f"MVN={named} is not an executable on PATH; unset MVN to use mvn or fetch Maven")
        return found
    found = shutil.which("mvn")
    if found:
        return found
    fetched = cached_mvn(cache, checksum_file)
    if fetched.is_file():
        return str(fetched)
    if os.environ.get("LAKEFLOW_JARS_OFFLINE", "").lower() in ("1", "true", "yes"):
        raise MavenUnavailable(
            f"no mvn on PATH and LAKEFLOW_JARS_OFFLINE is set, so Maven is not fetched. {_install_hint()}"
        )
    return str(install(cache, checksum_file))


def _install_hint() -> str:
    return (
        f"Run `make maven` where Maven Central (or $MAVEN_REPO) is reachable and copy {CACHE}/ here, "
        "or install Maven (Debian/Ubuntu: apt-get install maven)"
    )


def main() -> int:
    try:
        print(mvn())
    except MavenUnavailable as exc:
        print(f"lakeflow maven: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
