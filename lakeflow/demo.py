"""``lakeflow demo`` (``make demo``): the whole chain on the embedded catalog, bounded, in one command.

It runs the documented commands, in order, as a user would:

1. ``lakeflow flink up``: a local standalone Flink cluster, native lineage on;
2. the ``flink run`` that ``make package`` prints: the packaged ingestion job, a bounded number of
   readings, one JSON-array part file per checkpoint;
3. ``lakeflow compact``: the part files into the Iceberg table;
4. ``lakeflow harvest --format html``: jobs, runs and lineage of both into one page;
5. ``lakeflow query``: readings per sensor in the Iceberg table;

then says where everything is. Its state lives in ``$LAKEFLOW_HOME/demo`` (emptied first); its
settings are its own (no other variable of ``.env.local`` or the environment applies: no
Lakekeeper, no secret); its cluster listens on free ports (never those of ``make cluster-up``) and is
stopped at the end, on a failure, on Ctrl+C and on SIGTERM. Each step's output is in ``logs/``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from lakeflow.http import free_ports

RECORDS = 2_000
SENSORS = 5
BATCH_SIZE = 250  # readings per batch …
BATCH_INTERVAL_MS = 500  # … every half second (= checkpoint = part file): 2,000 readings in ~4 s
STEP_TIMEOUT_S = 600.0
PAGE = "lineage.html"


class DemoFailed(RuntimeError):
    """A step failed; the message names it and its log."""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``lakeflow demo`` to the ``lakeflow`` parser."""
    p = subparsers.add_parser(
        "demo",
        help="the whole chain, bounded, in one command: Flink cluster, flink run, compact, harvest, query",
        description="Start a local standalone Flink cluster (free ports), run the packaged ingestion job on it "
        "with `flink run` (a bounded number of readings into the embedded catalog), compact the "
        "part files into the Iceberg table, harvest the lineage into one HTML page and query the "
        "table; then print where everything is. State in $LAKEFLOW_HOME/demo (emptied first); "
        "no other setting of .env.local or the environment applies. The cluster is "
        "stopped at the end and on Ctrl+C. Needs `make package` (make demo runs it) and "
        "Graphviz's dot.",
    )
    p.add_argument("--records", type=int, default=RECORDS, help=f"readings to stream (default {RECORDS:,})")
    p.set_defaults(handler=_demo)


def _demo(args: argparse.Namespace) -> int:
    from lakeflow.settings import load_settings

    if args.records < 1:
        print("lakeflow demo: --records: expected a positive number", file=sys.stderr)
        return 2
    home = load_settings(local=True).home / "demo"
    try:
        return run(home, args.records)
    except DemoFailed as exc:
        print(f"lakeflow demo: {exc}", file=sys.stderr)
        return 1


def run(home: Path, records: int = RECORDS) -> int:
    """The demo in ``home`` (emptied first); 0 when every step worked, 130 when interrupted."""
    from lakeflow.flink_cluster import FlinkCluster

    home = home.resolve()
    jar, page = prerequisites(), home / PAGE
    cluster = FlinkCluster(home / "cluster")
    cluster.stop()  # a previous demo's, killed before it could stop it
    shutil.rmtree(home, ignore_errors=True)
    (home / "logs").mkdir(parents=True)
    env = environment(home, records, jar)
    rest_port, rpc_port = free_ports(2)
    rest_url = f"http://localhost:{rest_port}"
    previous = signal.signal(signal.SIGTERM, _interrupt)
    started = time.monotonic()
    try:
        step(
            1,
            "start a local standalone Flink cluster",
            env,
            home,
            lakeflow("flink", "up", "--rest-port", str(rest_port), "--rpc-port", str(rpc_port)),
        )
        from lakeflow.ingest.submit import flink_run_command

        wrote = step(
            2,
            f"flink run the packaged ingestion job ({records:,} readings)",
            env,
            home,
            flink_run_command(),
            shown="the `flink run` command of `make package`",
        )
        step(3, "compact the part files into the Iceberg table", env, home, lakeflow("compact"))
        step(
            4,
            "harvest jobs, runs and lineage into one page",
            env,
            home,
            lakeflow("harvest", "--rest-url", rest_url, "--format", "html", "--output", str(page)),
        )
        result = step(5, "query the Iceberg table (readings per sensor)", env, home, lakeflow("query"))
    except KeyboardInterrupt:
        print("\ninterrupted: stopping the demo's Flink cluster", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl+C must not leave the cluster running
        try:
            cluster.stop()
        finally:
            signal.signal(signal.SIGINT, signal.default_int_handler)
            signal.signal(signal.SIGTERM, previous)
    report(home, wrote, result, page, time.monotonic() - started)
    return 0


def prerequisites() -> Path:
    """The helpers jar (``make package`` builds it with the zipped package); Graphviz for the page."""
    from lakeflow.ingest import IngestError
    from lakeflow.ingest.helpers_jar import jar_path
    from lakeflow.ingest.submit import PACKAGE_ZIP
    from lakeflow.lineage.render import RenderError, require_dot

    try:
        jar = jar_path()
        require_dot()
    except (IngestError, RenderError) as exc:
        raise DemoFailed(str(exc)) from None
    if not PACKAGE_ZIP.is_file():
        raise DemoFailed(f"{PACKAGE_ZIP} is not built yet: run make package (make demo does)")
    return jar


def environment(home: Path, records: int, jar: Path) -> dict[str, str]:
    """The caller's environment without any lakeflow variable (nor a secret), plus the demo's own
    settings: embedded catalog under ``home``, a bounded run, no ``.env.local``."""
    from lakeflow.ingest.submit import submit_env
    from lakeflow.settings.env import variables
    from lakeflow.settings.example import sections

    ours = {name for model in sections() for name in variables(model)}
    env = {k: v for k, v in os.environ.items() if k not in ours}
    return {
        **env,
        "LAKEFLOW_ENV_FILE": os.devnull,
        "LAKEFLOW_HOME": str(home.resolve()),
        "NUM_RECORDS": str(records),
        "NUM_SENSORS": str(SENSORS),
        "BATCH_SIZE": str(BATCH_SIZE),
        "BATCH_INTERVAL_MS": str(BATCH_INTERVAL_MS),
        **submit_env(home, jar),
    }


def lakeflow(*args: str) -> list[str]:
    """A ``lakeflow`` command run with this interpreter."""
    return [sys.executable, "-m", "lakeflow.cli", *args]


def step(
    number: int, what: str, env: dict[str, str], home: Path, command: Sequence[str], shown: str | None = None
) -> str:
    """Run one step's command (output into ``logs/``), print how long it took; return its stdout."""
    print(f"[{number}/5] {what} …", flush=True)
    shown = shown or shlex.join(["lakeflow", *command[3:]] if command[:3] == lakeflow() else command)
    print(f"      $ {shown}", flush=True)
    log = home / "logs" / f"{number}-{what.split()[0]}.log"
    t0 = time.monotonic()
    with log.open("w") as err:
        # its own process group: on Ctrl+C or a timeout the whole step goes (flink run's Python client too)
        proc = subprocess.Popen(
            list(command), env=env, cwd=home, stdout=subprocess.PIPE, stderr=err, text=True, start_new_session=True
        )
        try:
            stdout, _ = proc.communicate(timeout=STEP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            stop_group(proc)
            raise DemoFailed(f"step {number} ({what}) took over {STEP_TIMEOUT_S:.0f} s; see {log}") from None
        except BaseException:
            stop_group(proc)
            raise
    with log.open("a") as out:
        out.write(stdout)
    if proc.returncode != 0:
        tail = "\n".join(log.read_text().splitlines()[-15:])
        raise DemoFailed(f"step {number} ({what}) failed (exit {proc.returncode}); {log}:\n{tail}")
    print(f"      done in {time.monotonic() - t0:.1f} s", flush=True)
    return stdout


def stop_group(proc: subprocess.Popen, grace_s: float = 5.0) -> None:
    """SIGTERM the step's process group; SIGKILL it if anything of it is left after ``grace_s``."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        proc.poll()  # reap the leader: a zombie still counts as a member of the group
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def report(home: Path, ingest_output: str, query_output: str, page: Path, seconds: float) -> None:
    """Where the raw files, the Iceberg table, the lineage store and the page are; the query result."""
    from lakeflow.cli import shown

    raw = next(iter(re.findall(r"^Wrote (.*)$", ingest_output, re.MULTILINE)), "(see logs/2-flink.log)")
    tables = sorted({p.parent.parent for p in (home / "iceberg").glob("**/metadata/*.metadata.json")})
    rel = os.path.relpath(home)
    rel = str(home.resolve()) if rel.startswith("..") else rel
    print(f"\nDone in {seconds:.0f} s; the Flink cluster is stopped. Everything is under {rel}:")
    print(f"  raw part files   {raw}")
    print(
        f"  Iceberg table    {', '.join(str(t) for t in tables) or home / 'iceberg'} (embedded catalog "
        f"{home / 'iceberg'})"
    )
    print(f"  lineage store    {home / 'lineage'} (OpenLineage events of the Flink job and of the compaction)")
    print(f"  step logs        {home / 'logs'}")
    print(f"\nlakeflow query (readings per sensor in the Iceberg table):\n{query_output.rstrip()}")
    print(f"\nLineage page: {page.resolve().as_uri()}  — open it in a browser.")
    query = shown("query", "--local", "'SELECT location, avg(humidity) FROM readings GROUP BY ALL'")
    print(
        f"Next: LAKEFLOW_HOME={rel} {query}\n      (your own SQL on the demo's table); the chain by hand, step "
        "by step: docs/walkthrough.md, 'The chain step by step'."
    )


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt
