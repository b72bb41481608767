"""Installing Flink's ``flink-s3-fs-hadoop`` plugin into the wheel's distribution (``make flink-plugins``).

The apache-flink wheel ships no S3 filesystem. The plugin jar of the same Flink version comes
from a Flink distribution's ``opt/`` (``$FLINK_HOME``) or, where it is reachable, a Maven
repository (``$MAVEN_REPO``, default Maven Central), checked against its published SHA-1.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
from importlib.metadata import version
from pathlib import Path
from typing import Optional

from lakeflow.ingest import IngestError
from lakeflow.ingest.storage import S3_PLUGIN, plugins_dir

log = logging.getLogger(__name__)

MAVEN_CENTRAL = "https://repo1.maven.org/maven2"


def flink_version() -> str:
    return version("apache-flink")


def install_s3_plugin(flink_home: Optional[Path] = None, *, timeout_s: float = 30.0) -> Path:
    """Put ``flink-s3-fs-hadoop-<version>.jar`` into ``<plugins>/s3-fs-hadoop/``; return its path."""
    jar_name = f"{S3_PLUGIN}-{flink_version()}.jar"
    target = plugins_dir() / "s3-fs-hadoop" / jar_name
    if target.is_file():
        log.info("already installed: %s", target)
        return target
    if flink_home is not None:
        source = Path(flink_home) / "opt" / jar_name
        if not source.is_file():
            raise IngestError(f"{source} not found: FLINK_HOME={flink_home} should be a Flink "
                              f"{flink_version()} distribution (its opt/ folder holds {jar_name})")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(source, target)
    else:
        repo = (os.environ.get("MAVEN_REPO") or MAVEN_CENTRAL).rstrip("/")
        _download(f"{repo}/org/apache/flink/{S3_PLUGIN}/{flink_version()}/{jar_name}", target, timeout_s)
    log.info("installed %s", target)
    return target


def _download(url: str, target: Path, timeout_s: float) -> None:
    import requests

    try:
        expected = requests.get(f"{url}.sha1", timeout=timeout_s)
        expected.raise_for_status()
        response = requests.get(url, timeout=timeout_s)
        response.raise_for_status()
    except requests.RequestException as exc:
        raise IngestError(
            f"cannot download {url} ({type(exc).__name__}): the Maven repository is not reachable. "
            f"Set FLINK_HOME to a Flink {flink_version()} distribution and run `make flink-plugins` "
            f"again, or copy {url.rsplit('/', 1)[1]} into {target.parent}/ yourself") from None
    digest = hashlib.sha1(response.content).hexdigest()
    if digest != expected.text.split()[0].strip():
        raise IngestError(f"{url}: SHA-1 {digest} does not match the published {expected.text.strip()}")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".part")
    tmp.write_bytes(response.content)
    tmp.replace(target)
