"""Test support for ``s3_cli.py``: an embedded SQL catalog whose warehouse is on S3 (``ICEBERG_WAREHOUSE``
+ ``ICEBERG_S3_*``), for tests that run against the plain Lakekeeper stand-in, which serves the raw
table and its vended credentials but no Iceberg REST catalog.

tests/integration/test_compaction_s3.py needs neither: it runs ``lakeflow compact`` as is against the stand-in
fronting Iceberg's REST server (both catalogs at one ``LAKEKEEPER`` URL).
"""

import os
from pathlib import Path

from pyiceberg.catalog.sql import SqlCatalog


def s3_catalog(home: Path) -> SqlCatalog:
    """The embedded SQL catalog in ``home`` with its warehouse on S3 (``ICEBERG_*`` variables)."""
    home.mkdir(parents=True, exist_ok=True)
    return SqlCatalog("s3test", uri=f"sqlite:///{home / 'iceberg.db'}", warehouse=os.environ["ICEBERG_WAREHOUSE"],
                      **{"s3.endpoint": os.environ["ICEBERG_S3_ENDPOINT"], "s3.region": "us-east-1",
                         "s3.access-key-id": os.environ["ICEBERG_S3_KEY"],
                         "s3.secret-access-key": os.environ["ICEBERG_S3_SECRET"]})
