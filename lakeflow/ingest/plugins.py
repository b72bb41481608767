"""``lakeflow ingest plugins``: Flink's ``flink-s3-fs-hadoop`` plugin in Flink's ``plugins/``.

The jar is fetched by :mod:`lakeflow.jars` (Maven, checksums verified, cached in ``build/jars/``),
or copied from ``opt/`` of a Flink distribution of the same version (``$FLINK_HOME``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from lakeflow import jars
from lakeflow.ingest import IngestError
from lakeflow.ingest.storage import S3_PLUGIN, plugins_dir


def install_s3_plugin(flink_home: Optional[Path] = None) -> Path:
    """Put ``flink-s3-fs-hadoop-<version>.jar`` into ``<plugins>/s3-fs-hadoop/``; return its path."""
    flink_version = jars.flink_version()
    source = None
    if flink_home is not None:
        source = Path(flink_home) / "opt" / f"{S3_PLUGIN}-{flink_version}.jar"
        if not source.is_file():
            raise IngestError(f"{source} not found: FLINK_HOME={flink_home} should be a Flink "
                              f"{flink_version} distribution (its opt/ folder holds {source.name})")
    try:
        return jars.install_flink_plugin(plugins_dir(), source=source)
    except jars.JarsUnavailable as exc:
        raise IngestError(f"{exc}; or set FLINK_HOME to a Flink {flink_version} distribution (the "
                          "plugin is in its opt/)") from None
