"""Stream IoT sensor readings (synthetic, or from Kafka) into a generic table: one JSON array per checkpoint.

Runs as ``python jobs/sensor_ingest.py`` (local MiniCluster; ``make run``) and as
``flink run -py jobs/sensor_ingest.py`` against a cluster (``make package`` prints the command).
Settings come from the environment and ``.env.local``; see docs/ingestion.md.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout, for a plain `python jobs/…`

from lakeflow.catalog import open_catalog  # noqa: E402
from lakeflow.cli.ingest import IngestArgs, run_job  # noqa: E402
from lakeflow.ingest import client_jvm  # noqa: E402
from lakeflow.ingest.job import IngestJob  # noqa: E402
from lakeflow.ingest.storage import configure_filesystems, require_filesystem  # noqa: E402
from lakeflow.ingest.streams import ingest_streams, table_write  # noqa: E402
from lakeflow.settings import load_settings  # noqa: E402
from lakeflow.streams import load_pipeline  # noqa: E402
from lakeflow.uris import is_s3  # noqa: E402

log = logging.getLogger("lakeflow.ingest")


def ingest(args: IngestArgs) -> bool:
    """Register every stream's raw table, run one job into all of them; whether it ran on a cluster
    (``flink run``). A topic of a pattern that appears meanwhile restarts the job from a savepoint
    with its table added."""
    settings = load_settings(local=args.local or None)
    os.environ.setdefault("FLINK_LOG_DIR", str(settings.home / "log"))  # before the JVM starts
    client_jvm.configure()  # a local run's JVM starts sooner
    savepoint = None
    with open_catalog(settings) as catalog:  # open while the job runs: the watcher re-vends
        while True:
            outcome, in_process = run(settings, catalog, args, savepoint)
            for summary in outcome.summaries:
                print(f"Wrote {summary}")
            if outcome.savepoint is None:
                return not in_process
            savepoint = outcome.savepoint
            print(f"Restarting from savepoint {savepoint} with the new topics' tables")


def run(settings, catalog, args: IngestArgs, savepoint: str | None):
    """One job over the streams found now (restoring ``savepoint`` if given): its outcome, and
    whether it ran in this process."""
    streams = ingest_streams(settings)
    tables = [table_write(catalog, stream) for stream in streams]  # registered (idempotent) and loaded
    for table in tables:
        print(f"{'Created' if table.created else 'Found'} table {table.write.ident} → {table.write.location}")
    job = IngestJob.plan(settings, [t.write for t in tables], parallelism=args.parallelism)
    for table in tables:
        require_filesystem(table.write.location)

    from lakeflow.ingest import pipeline
    from lakeflow.ingest.progress import PartFiles, committed_since

    in_process = not pipeline.submitted_by_flink_cli()
    on_s3 = [t for t in tables if is_s3(t.write.location)]  # each written through its own filesystem
    if on_s3:
        configure_filesystems(
            on_s3[0].write.location, on_s3[0].handle.s3a(settings.s3_endpoint).flink(), in_process=in_process
        )
    env = pipeline.create_environment(job, savepoint)
    pipeline.build(env, job)

    def revend(stream):  # the progress watcher's listing, for runs that outlive the credentials
        return lambda: catalog.load(stream.namespace, stream.table, vended=True).s3a(settings.s3_endpoint)

    def part_files(location, table):
        return PartFiles(location, table.handle.s3a(settings.s3_endpoint), refresh=revend(table.write.stream))

    def grown() -> bool:  # a new topic of a pattern: a table the job does not write yet
        return bool({s.raw_name for s in ingest_streams(settings)} - {s.raw_name for s in streams})

    dead_letters = [part_files(t.write.dead_letters, t) for t in tables] if job.kafka else []
    before = [d.scan().committed for d in dead_letters]
    files = [part_files(t.write.location, t) for t in tables]
    outcome = pipeline.execute(env, job, files, grown if load_pipeline(settings).patterns else None)
    for letters, seen in zip(dead_letters, before, strict=True):
        rejected = committed_since(letters.scan(), seen, letters.location)
        print(f"Dead letters: {rejected.records} messages that are no readings → {rejected.location}")
    return outcome, in_process


if __name__ == "__main__":
    sys.exit(run_job(ingest, sys.argv[1:], __doc__.splitlines()[0]))
