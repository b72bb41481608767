"""``lakeflow demo`` (``make demo``): the whole chain on the embedded catalog, bounded, in one command.

It runs the documented commands, in order, as a user would:

1. ``lakeflow flink up``: a local standalone Flink cluster, native lineage on;
2. the ``flink run`` that ``make package`` prints: the packaged ingestion job, a bounded number of
   readings, one JSON-array part file per checkpoint;
3. ``lakeflow compact``: the part files into the Iceberg table;
4. ``lakeflow harvest --format html``: jobs, runs and lineage of both into one page;
5. ``lakeflow query``: readings per sensor in the Iceberg table;

then says where everything is. With ``--source kafka`` (``make demo SOURCE=kafka``) two steps come
first: a local Kafka broker (:mod:`lakeflow.runtime.kafka`, free ports, data under ``kafka/``) and a
producer writing the synthetic readings to its topic ``sensor-readings``; the job then reads that
topic (``SOURCE=kafka``, bounded by ``KAFKA_STOP_AT=latest``) and the page shows the chain
topic → raw table → Iceberg table. The broker is stopped with the cluster. Its state lives in ``$LAKEFLOW_HOME/demo`` (emptied first); its
settings are its own (no other variable of ``.env.local`` or the environment applies: no
Lakekeeper, no secret); its cluster (and broker) listen on free ports (never those of ``make cluster-up``) and
are stopped at the end, on a failure, on Ctrl+C and on SIGTERM. Each step's output is in ``logs/``.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shlex
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from lakeflow.errors import LakeflowError
from lakeflow.runtime.ports import free_ports

RECORDS = 2_000
SENSORS = 5
BATCH_SIZE = 250  # readings per batch …
BATCH_INTERVAL_MS = 500  # … every half second (= checkpoint = part file): 2,000 readings in ~4 s
STEP_TIMEOUT_S = 600.0
PAGE = "lineage.html"
SOURCES = ("synthetic", "kafka")
TOPIC = "sensor-readings"  # the topic of --source kafka


class DemoFailed(LakeflowError, RuntimeError):
    """A step failed; the message names it and its log."""

    exit_code = 1


@dataclass(frozen=True)
class DemoRun:
    """A demo that ran through: where, the ingestion's and the query's output, the page, how long."""

    home: Path
    ingest_output: str
    query_output: str
    page: Path
    seconds: float
    topic: Topic | None = None


@dataclass
class Steps:
    """The demo's numbered steps ``[n/total]``."""

    total: int
    done: int = 0

    def next(self, what: str) -> int:
        self.done += 1
        print(f"[{self.done}/{self.total}] {what} …", flush=True)
        return self.done


def run(
    home: Path, lakeflow_variables: Iterable[str], records: int = RECORDS, source: str = "synthetic"
) -> DemoRun | None:
    """The demo in ``home`` (emptied first), none of ``lakeflow_variables`` of the caller's environment
    applying; reading from a local Kafka topic with ``source="kafka"``; None when interrupted."""
    from lakeflow.runtime.flink_cluster import FlinkCluster
    from lakeflow.secret import is_secret_key

    home = home.resolve()
    jar, page = prerequisites(), home / PAGE
    cluster = FlinkCluster(home / "cluster", secret_variable=is_secret_key)
    cluster.stop()  # a previous demo's, killed before it could stop it
    shutil.rmtree(home, ignore_errors=True)
    (home / "logs").mkdir(parents=True)
    env = environment(home, records, jar, set(lakeflow_variables))
    rest_port, rpc_port = free_ports(2)
    rest_url = f"http://localhost:{rest_port}"
    steps = Steps(7 if source == "kafka" else 5)
    topic: Topic | None = None
    previous = signal.signal(signal.SIGTERM, _interrupt)
    started = time.monotonic()
    try:
        with contextlib.ExitStack() as broker:
            if source == "kafka":
                topic = broker.enter_context(kafka_topic(home, records, steps))
                env.update(kafka_environment(topic))
            step(
                steps,
                "start a local standalone Flink cluster",
                env,
                home,
                lakeflow("flink", "up", "--rest-port", str(rest_port), "--rpc-port", str(rpc_port)),
            )
            from lakeflow.ingest.submit import flink_run_command

            wrote = step(
                steps,
                f"flink run the packaged ingestion job ({records:,} readings{' from the topic' if topic else ''})",
                env,
                home,
                flink_run_command(),
                shown="the `flink run` command of `make package`",
            )
        step(steps, "compact the part files into the Iceberg table", env, home, lakeflow("compact"))
        step(
            steps,
            "harvest jobs, runs and lineage into one page",
            env,
            home,
            lakeflow("harvest", "--rest-url", rest_url, "--format", "html", "--output", str(page)),
        )
        result = step(steps, "query the Iceberg table (readings per sensor)", env, home, lakeflow("query"))
    except KeyboardInterrupt:
        print(
            f"\ninterrupted: stopping the demo's Flink cluster{' and Kafka broker' if topic else ''}", file=sys.stderr
        )
        return None
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl+C must not leave the cluster running
        try:
            cluster.stop()
        finally:
            signal.signal(signal.SIGINT, signal.default_int_handler)
            signal.signal(signal.SIGTERM, previous)
    return DemoRun(home, wrote, result, page, time.monotonic() - started, topic)


@dataclass(frozen=True)
class Topic:
    """The demo's topic on its broker, named as OpenLineage names a Kafka dataset."""

    bootstrap: str
    name: str

    def __str__(self) -> str:
        return f"kafka://{self.bootstrap}/{self.name}"


@contextlib.contextmanager
def kafka_topic(home: Path, records: int, steps: Steps) -> Iterator[Topic]:
    """Two steps: a local Kafka broker (data and log under ``home/kafka``) with the topic, then
    ``records`` synthetic readings produced to it; the broker is stopped at the end."""
    from lakeflow.runtime.kafka import KafkaUnavailable, run_kafka

    steps.next("start a local Kafka broker")
    t0 = time.monotonic()
    try:
        with run_kafka(home / "kafka", *free_ports(2)) as broker:
            broker.create_topic(TOPIC, partitions=2)
            print(f"      broker {broker.bootstrap}, topic {TOPIC} (log {broker.log})", flush=True)
            print(f"      done in {time.monotonic() - t0:.1f} s", flush=True)
            steps.next(f"produce {records:,} synthetic readings to the topic")
            t0 = time.monotonic()
            broker.produce(TOPIC, synthetic_readings(records), timeout=STEP_TIMEOUT_S)
            print(f"      done in {time.monotonic() - t0:.1f} s", flush=True)
            yield Topic(broker.bootstrap, TOPIC)
    except KafkaUnavailable as exc:
        raise DemoFailed(f"the Kafka broker: {exc}") from None


def synthetic_readings(records: int) -> list[str]:
    """``records`` records of the default schema from :data:`SENSORS` sensors as JSON (what the synthetic
    source makes), one run id, a millisecond apart."""
    from lakeflow.ingest.sensors import Generator
    from lakeflow.schema import load_schema

    generator, now, rng = Generator(load_schema(), SENSORS, str(uuid.uuid4())), int(time.time() * 1000), random.Random()
    return [json.dumps(generator.record(seq, now + seq, rng)) for seq in range(records)]


def kafka_environment(topic: Topic) -> dict[str, str]:
    """The job's Kafka settings: the demo's topic, read up to the offsets present at its start."""
    return {
        "SOURCE": "kafka",
        "KAFKA_BOOTSTRAP_SERVERS": topic.bootstrap,
        "KAFKA_TOPIC": topic.name,
        "KAFKA_STOP_AT": "latest",
    }


def prerequisites() -> Path:
    """The helpers jar (``make package`` builds it with the zipped package)."""
    from lakeflow.ingest import IngestError
    from lakeflow.ingest.helpers_jar import jar_path
    from lakeflow.ingest.submit import PACKAGE_ZIP

    try:
        jar = jar_path()
    except IngestError as exc:
        raise DemoFailed(str(exc)) from None
    if not PACKAGE_ZIP.is_file():
        raise DemoFailed(f"{PACKAGE_ZIP} is not built yet: run make package (make demo does)")
    return jar


def environment(home: Path, records: int, jar: Path, ours: set[str]) -> dict[str, str]:
    """The caller's environment without any lakeflow variable (``ours``; nor a secret), plus the demo's
    own settings: embedded catalog under ``home``, a bounded run, no ``.env.local``."""
    from lakeflow.ingest.submit import submit_env

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
    steps: Steps, what: str, env: dict[str, str], home: Path, command: Sequence[str], shown: str | None = None
) -> str:
    """Run the next step's command (output into ``logs/``), print how long it took; return its stdout."""
    number = steps.next(what)
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


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt
