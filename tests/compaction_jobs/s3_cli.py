"""Test driver: ``python -m lakeflow.cli compact …`` as is, except for the Iceberg catalog — the
embedded SQL catalog with its warehouse on S3 of ``s3_stages.py``, since the Lakekeeper stand-in
serves the raw table and its vended credentials but no Iceberg REST catalog. Everything else (the
launcher, the lock, each stage, exit codes) is ``lakeflow compact``'s own code.
"""

import sys

from lakeflow.cli.main import main
from lakeflow.compaction import run
from tests.compaction_jobs.s3_stages import s3_catalog

if __name__ == "__main__":
    run.iceberg_catalog = lambda settings: s3_catalog(settings.home)
    sys.exit(main(sys.argv[1:]))
