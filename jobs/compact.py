"""PySpark job: compact the raw table's committed JSON part files into Iceberg.

    spark-submit --master local[2] jobs/compact.py [--engine auto|spark|arrow] [--delete-source] [...]
    python jobs/compact.py [...]
    lakeflow compact [...]      # ``make compact``: calls compact() below in its own process

The engine (Spark, or pyarrow in the driver for small batches) is chosen per batch; Spark starts
only when it is needed. Settings and credentials come from the environment and ``.env.local``,
never from the command line. Every step lives in ``lakeflow.compaction``; this file is the
pipeline, top to bottom; its flags are ``lakeflow compact``'s (``lakeflow.cli.compact``).
"""

import logging
import sys

from lakeflow.cli.compact import run_job
from lakeflow.compaction.config import CompactConfig, crash_point
from lakeflow.compaction.lineage import lineage_run
from lakeflow.compaction.maintain import after_compaction
from lakeflow.compaction.run import (
    begin,
    commit_batch,
    compact_batch,
    discover_new_files,
    emit_report,
    hold_lease,
    name_data_files,
    plan,
    plan_schema,
    quarantine_bad_input,
    recover_orphans,
    tidy_up,
)
from lakeflow.runtime.memory import cycle_collector_paused


def compact(config: CompactConfig) -> int:
    if config.engine == "spark":  # the driver's JVM starts while the run plans
        from lakeflow.compaction.spark.session import launch_early

        launch_early(config.spark_options)
    with cycle_collector_paused():  # (millions of objects: no full collections in between)
        return _compact(config)


def _compact(config: CompactConfig) -> int:
    run = begin(config)  # raw table, Iceberg table (created on first use)
    with hold_lease(run):  # one run per target table at a time, on any host
        try:
            with lineage_run(config, run.raw, run.target, run.report):  # START … COMPLETE | FAIL
                plan(run)  # the snapshot planned on, and its ledger
                plan_schema(run)  # the declared schema vs the table's: evolution applied, or refused here
                recover_orphans(run)  # files of interrupted runs go
                batch = discover_new_files(run)  # committed part files not in the ledger
                compact_batch(run, batch)  # engine: parse, bad records aside, dedupe, sort → staged Parquet
                quarantine_bad_input(run, batch)  # empty / malformed files, counts
                name_data_files(run, batch)  # final names (intent recorded first)
                crash_point(config, "after-write")
                commit_batch(run, batch)  # data files + schema evolution + ledger: one Iceberg commit
                crash_point(config, "after-commit")
                tidy_up(run, batch)  # staging, --delete-source / --raw-retention
            if config.maintain:
                after_compaction(run)  # --maintain: lakeflow maintain, under this lease
        finally:
            emit_report(run)
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    sys.exit(run_job(compact, sys.argv[1:]))
