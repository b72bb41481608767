"""Test driver, run with spark-submit: jobs/compact.py's stages against S3 (a moto server).

The raw table comes from the Lakekeeper stand-in with vended STS credentials (translated to
``fs.s3a.*`` by lakeflow); the Iceberg table lives in an embedded SQL catalog whose warehouse is on
the same S3 (``ICEBERG_WAREHOUSE`` + ``ICEBERG_S3_*``), since the stand-in has no Iceberg REST
catalog. Everything after opening the two tables is the job's own code, in the job's order.
"""

import logging
import os
import sys
from pathlib import Path

from pyiceberg.catalog.sql import SqlCatalog

from lakeflow.compaction.commit import open_target
from lakeflow.compaction.config import load_config
from lakeflow.compaction.lineage import lineage_run
from lakeflow.compaction.report import Report
from lakeflow.compaction.run import (Run, close, commit_batch, discover_new_files, emit_report, hold_lease,
                                     name_data_files, plan, quarantine_bad_input, read_batch, recover_orphans,
                                     tidy_up, write_parquet)
from lakeflow.compaction.source import open_raw


def s3_catalog(home: Path) -> SqlCatalog:
    """The embedded SQL catalog in ``home`` with its warehouse on S3 (``ICEBERG_*`` variables)."""
    home.mkdir(parents=True, exist_ok=True)
    return SqlCatalog("s3test", uri=f"sqlite:///{home / 'iceberg.db'}", warehouse=os.environ["ICEBERG_WAREHOUSE"],
                      **{"s3.endpoint": os.environ["ICEBERG_S3_ENDPOINT"], "s3.region": "us-east-1",
                         "s3.access-key-id": os.environ["ICEBERG_S3_KEY"],
                         "s3.secret-access-key": os.environ["ICEBERG_S3_SECRET"]})


def main() -> int:
    config = load_config(sys.argv[1:])
    raw = open_raw(config.settings)  # Lakekeeper stand-in: vended credentials for the raw table
    target = open_target(s3_catalog(config.settings.home), config.namespace, config.target_table, raw.location)
    run = Run(config=config, raw=raw, target=target,
              report=Report(run_id=config.run_id, source=raw.location, target=config.target_name))
    with hold_lease(run):
        try:
            with lineage_run(config, raw, target, run.report):
                plan(run)
                recover_orphans(run)
                batch = discover_new_files(run)
                read_batch(run, batch)
                quarantine_bad_input(run, batch)
                write_parquet(run, batch)
                name_data_files(run, batch)
                commit_batch(run, batch)
                tidy_up(run, batch)
        finally:
            emit_report(run)
            close(run)
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    sys.exit(main())
