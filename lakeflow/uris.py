"""Storage URI schemes: which name S3, and a URI as Hadoop or Iceberg spells it.

Iceberg, Lakekeeper and OpenLineage write S3 as ``s3://``; Hadoop's S3A (Spark, Flink's
``flink-s3-fs-hadoop``) as ``s3a://``; ``s3n://`` is Hadoop's retired spelling, still met in old
URIs. A table lakeflow writes lives under ``file://`` or one of :data:`S3_SCHEMES`.
"""

from __future__ import annotations

from urllib.parse import urlparse

FILE = "file"
S3, S3A, S3N = "s3", "s3a", "s3n"
S3_SCHEMES = (S3, S3A)  # what table locations on S3 may use: Flink's plugin, S3A and pyarrow take both
S3_SPELLINGS = (S3, S3A, S3N)  # every scheme naming S3 in a URI lakeflow reads


def is_s3(uri: str) -> bool:
    """True for an ``s3://`` or ``s3a://`` URI."""
    return urlparse(uri).scheme in S3_SCHEMES


def is_local(uri: str) -> bool:
    """True for a ``file:`` URI or a plain path."""
    return urlparse(uri).scheme in ("", FILE)


def canonical_scheme(scheme: str) -> str:
    """``s3`` for any spelling of S3, else ``scheme`` as it is."""
    return S3 if scheme in S3_SPELLINGS else scheme


def iceberg_uri(uri: str) -> str:
    """The URI as Iceberg records it (``s3a://`` → ``s3://``, ``file:/x`` → ``file:///x``)."""
    parsed = urlparse(uri)
    if parsed.scheme in S3_SPELLINGS:
        return S3 + uri[len(parsed.scheme) :]
    if parsed.scheme == FILE:
        return "file://" + parsed.path
    return uri
