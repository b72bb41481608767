"""``make chaos``: run every fault-injection scenario, one summary line each; exit 1 when a count
promised to be zero is not (or a scenario's checks failed).

    python -m tests.chaos.run [SCENARIO ...] [--keep DIR]

Progress goes to stderr, the summary lines to stdout.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Optional, Sequence

from tests.chaos.catalog_faults import lakekeeper_faults, oauth_expiry
from tests.chaos.common import Result
from tests.chaos.compaction_faults import bad_files, compact_kill, two_compactors
from tests.chaos.fleet_faults import tm_kill_fleet
from tests.chaos.harvest_faults import harvest_garbage
from tests.chaos.kafka_faults import tm_kill_kafka
from tests.chaos.spark_faults import executor_kill
from tests.chaos.tm_kill import tm_kill

SCENARIOS: dict[str, Callable[[Path], Result]] = {
    "tm-kill": tm_kill,
    "tm-kill-s3": lambda workdir: tm_kill(workdir, s3=True),
    "tm-kill-kafka": tm_kill_kafka,
    "tm-kill-fleet": tm_kill_fleet,
    "compact-kill": compact_kill,
    "two-compactors": two_compactors,
    "executor-kill": executor_kill,
    "bad-files": bad_files,
    "bad-files-arrow": lambda workdir: bad_files(workdir, engine="arrow"),
    "lakekeeper-faults": lakekeeper_faults,
    "oauth-expiry": oauth_expiry,
    "harvest-garbage": harvest_garbage,
}


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.chaos.run", description=__doc__.splitlines()[0])
    parser.add_argument("scenarios", nargs="*", metavar="SCENARIO",
                        help=f"which to run (default all): {', '.join(SCENARIOS)}")
    parser.add_argument("--keep", type=Path, metavar="DIR",
                        help="work in DIR and keep it (logs, tables) instead of a removed temp dir")
    args = parser.parse_args(argv)
    unknown = [s for s in args.scenarios if s not in SCENARIOS]
    if unknown:
        parser.error(f"unknown scenario {', '.join(unknown)}: expected {', '.join(SCENARIOS)}")
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    root = args.keep or Path(tempfile.mkdtemp(prefix="lakeflow-chaos-"))
    started = time.monotonic()
    results = []
    try:
        for name in args.scenarios or SCENARIOS:
            workdir = root / name
            workdir.mkdir(parents=True, exist_ok=True)
            print(f"  [{name}] starting (work dir {workdir})", file=sys.stderr, flush=True)
            results.append(SCENARIOS[name](workdir))
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    failed = [r.name for r in results if not r.ok]
    print(f"chaos: {len(results)} scenarios, {len(failed)} failed{': ' + ', '.join(failed) if failed else ''} "
          f"({time.monotonic() - started:.0f} s)", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
