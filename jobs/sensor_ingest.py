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
from lakeflow.ingest.job import IngestJob  # noqa: E402
from lakeflow.ingest.storage import configure_filesystems, require_filesystem  # noqa: E402
from lakeflow.settings import load_settings  # noqa: E402

log = logging.getLogger("lakeflow.ingest")


def ingest(args: IngestArgs) -> bool:
    """Register the raw table, run the job into it; whether it ran on a cluster (``flink run``)."""
    settings = load_settings(local=args.local or None)
    os.environ.setdefault("FLINK_LOG_DIR", str(settings.home / "log"))  # before the JVM starts

    with open_catalog(settings) as catalog:  # open while the job runs: the watcher re-vends
        registered = catalog.register(settings.namespace, settings.table)  # idempotent
        print(f"{'Created' if registered.created else 'Found'} table {registered.ident} → {registered.location}")
        handle = catalog.load(settings.namespace, settings.table, vended=True)
        s3a = handle.s3a(settings.s3_endpoint)

        job = IngestJob.plan(settings, handle, parallelism=args.parallelism)
        require_filesystem(job.location)

        from lakeflow.ingest import pipeline
        from lakeflow.ingest.kafka import dead_letter_location
        from lakeflow.ingest.progress import PartFiles, committed_since

        in_process = not pipeline.submitted_by_flink_cli()
        if in_process and s3a.expires_at and not job.bounded:
            log.warning(
                "this run writes %s with vended credentials that expire at %s and are not renewed "
                "in-process: for a run longer than that, use `lakeflow flink up` and `flink "
                "run` (refreshing AWS profile; docs/ingestion.md)",
                job.location,
                s3a.expires_at.isoformat(timespec="seconds"),
            )
        configure_filesystems(job.location, s3a.flink(), in_process=in_process)
        env = pipeline.create_environment(job)
        pipeline.build(env, job)

        def revend():  # the progress watcher's listing, for runs that outlive the credentials
            fresh = catalog.load(settings.namespace, settings.table, vended=True)
            return fresh.s3a(settings.s3_endpoint)

        dead_letters = PartFiles(dead_letter_location(job.location), s3a, refresh=revend) if job.kafka else None
        before = dead_letters.scan().committed if dead_letters else {}
        summary = pipeline.execute(env, job, PartFiles(job.location, s3a, refresh=revend))
        if dead_letters:
            rejected = committed_since(dead_letters.scan(), before, dead_letters.location)
            print(f"Dead letters: {rejected.records} messages that are no readings → {rejected.location}")
    print(f"Wrote {summary}")
    return not in_process


if __name__ == "__main__":
    sys.exit(run_job(ingest, sys.argv[1:], __doc__.splitlines()[0]))
