"""A local Apache Kafka broker: Kafka of the ``kafka-broker`` jar set (:mod:`lakeflow.runtime.jars`,
fetched by Maven with verified checksums) as one KRaft node, broker and controller, on 127.0.0.1;
topics and records through Kafka's own tools (``TopicCommand``, ``ConsoleProducer``).

``lakeflow demo --source kafka`` runs one beside its Flink cluster; the tests and benchmarks too.
:func:`run_kafka` formats the log folder (``kafka.tools.StorageTool``), starts the broker on the
ports it is given and stops it at the end; :meth:`KafkaBroker.restart` restarts it on the same data
(``make soak``'s broker restart).
"""

from __future__ import annotations

import base64
import os
import re
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from lakeflow.errors import LakeflowError
from lakeflow.runtime.jars import JarsUnavailable, fetch, kafka_broker_set

JVM_OPTIONS = ("-Xmx384m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
TOOL_JVM_OPTIONS = ("-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
STOP_GRACE_S = 10.0


class KafkaUnavailable(LakeflowError, RuntimeError):
    """Kafka could not be had or started (jars, Java, a tool failing); the message says which."""


def new_cluster_id() -> str:
    """A random KRaft cluster id as Kafka's ``Uuid.randomUuid()`` makes one: URL-safe base64 of 16
    random bytes, never starting with ``-`` (the storage tool would read it as an option)."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


def _run(cmd: Sequence[str], what: str, timeout: float, stdin: str | None = None) -> str:
    try:
        done = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout, input=stdin)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise KafkaUnavailable(f"{what}: {exc}") from exc
    if done.returncode != 0:
        lines = re.sub(r"\x1b\[[0-9;]*m", "", done.stdout + done.stderr).splitlines()
        errors = [line for line in lines if line.startswith("[ERROR]") or "Exception" in line]
        raise KafkaUnavailable(f"{what} failed (exit {done.returncode}): " + " | ".join((errors or lines[-4:])[:4]))
    return done.stdout


def java() -> str:
    """``java`` of ``$JAVA_HOME``, else of PATH."""
    home = os.environ.get("JAVA_HOME")
    path = os.pathsep.join(([str(Path(home) / "bin")] if home else []) + [os.environ.get("PATH", "")])
    found = shutil.which("java", path=path)
    if found is None:
        raise KafkaUnavailable("java (17+) not found on PATH or in JAVA_HOME: needed to run Kafka")
    return found


def kafka_jars() -> list[Path]:
    """Kafka's runtime classpath (the ``kafka-broker`` set, fetched if need be)."""
    try:
        return fetch(kafka_broker_set())
    except JarsUnavailable as exc:
        raise KafkaUnavailable(str(exc)) from None


class _Server:
    """The broker's JVM: started on a formatted folder's ``server.properties``, stopped, started again."""

    def __init__(self, props: Path, classpath: str, log: Path, port: int, timeout: float) -> None:
        self.props, self.classpath, self.log, self.port, self.timeout = props, classpath, log, port, timeout
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                [java(), *JVM_OPTIONS, "-cp", self.classpath, "kafka.Kafka", str(self.props)],
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, "LOG_DIR": str(self.props.parent)},
                cwd=self.props.parent,
            )
        _wait_ready(self.port, self.proc, self.log, self.timeout)

    def stop(self) -> None:
        if self.proc is not None:
            _stop(self.proc)


@dataclass(frozen=True)
class KafkaBroker:
    """A running broker: clients connect to ``bootstrap`` (``127.0.0.1:<port>``)."""

    bootstrap: str
    classpath: str
    log: Path
    server: _Server | None = field(default=None, repr=False, compare=False)

    @property
    def pid(self) -> int | None:
        """The broker JVM's process id (None once stopped)."""
        proc = self.server.proc if self.server else None
        return proc.pid if proc is not None and proc.poll() is None else None

    def restart(self, down_s: float = 0.0) -> None:
        """Stop the broker (SIGTERM: a clean shutdown), wait ``down_s``, start it again on the same ports
        and data; returns once it answers a topic listing."""
        assert self.server is not None, "not started by run_kafka"
        self.server.stop()
        time.sleep(down_s)
        self.server.start()
        self.topics()

    def _tool(self, main_class: str, *args: str, stdin: str | None = None, timeout: float = 60.0) -> str:
        return _run(
            [java(), *TOOL_JVM_OPTIONS, "-cp", self.classpath, main_class, *args],
            f"{main_class} {' '.join(args)}",
            timeout,
            stdin,
        )

    def create_topic(self, name: str, partitions: int = 1) -> None:
        self._tool(
            "org.apache.kafka.tools.TopicCommand",
            *("--bootstrap-server", self.bootstrap, "--create", "--if-not-exists", "--topic", name),
            *("--partitions", str(partitions), "--replication-factor", "1"),
        )

    def topics(self) -> list[str]:
        out = self._tool("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", self.bootstrap, "--list")
        return sorted(line.strip() for line in out.splitlines() if line.strip())

    def produce(self, topic: str, records: Sequence[str], timeout: float = 60.0) -> None:
        """Write ``records`` (one line each) to ``topic`` with Kafka's console producer."""
        self._tool(
            "org.apache.kafka.tools.ConsoleProducer",
            *("--bootstrap-server", self.bootstrap, "--topic", topic),
            stdin="".join(f"{r}\n" for r in records),
            timeout=timeout,
        )


def server_properties(port: int, controller_port: int, log_dirs: Path) -> str:
    return "\n".join(
        [
            "process.roles=broker,controller",
            "node.id=1",
            f"controller.quorum.voters=1@127.0.0.1:{controller_port}",
            f"listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
            f"advertised.listeners=PLAINTEXT://127.0.0.1:{port}",
            "controller.listener.names=CONTROLLER",
            "inter.broker.listener.name=PLAINTEXT",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            f"log.dirs={log_dirs}",
            "num.partitions=1",
            "offsets.topic.replication.factor=1",
            "transaction.state.log.replication.factor=1",
            "transaction.state.log.min.isr=1",
            "share.coordinator.state.topic.replication.factor=1",
            "share.coordinator.state.topic.min.isr=1",
            "group.initial.rebalance.delay.ms=0",
            "auto.create.topics.enable=false",
            "",
        ]
    )


@contextmanager
def run_kafka(work: Path, port: int, controller_port: int, timeout: float = 60.0) -> Iterator[KafkaBroker]:
    """A KRaft broker + controller on 127.0.0.1 ``port`` / ``controller_port`` with its data and
    log under ``work``; returns once it answers a topic listing, stops the JVM at the end."""
    classpath = os.pathsep.join(map(str, kafka_jars()))
    work.mkdir(parents=True, exist_ok=True)
    props = work / "server.properties"
    props.write_text(server_properties(port, controller_port, work / "data"))
    cluster_id = new_cluster_id()
    storage_tool = [java(), *TOOL_JVM_OPTIONS, "-cp", classpath, "kafka.tools.StorageTool"]
    _run([*storage_tool, "format", "-t", cluster_id, "-c", str(props)], "kafka-storage format", timeout=120)
    log = work / "kafka.log"
    log.write_bytes(b"")
    server = _Server(props, classpath, log, port, timeout)
    broker = KafkaBroker(f"127.0.0.1:{port}", classpath, log, server)
    try:
        server.start()
        broker.topics()  # the broker answers metadata requests
        yield broker
    finally:
        server.stop()


def _wait_ready(port: int, proc: subprocess.Popen, log: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            tail = log.read_text(errors="replace")[-3000:]
            raise KafkaUnavailable(f"Kafka exited ({proc.returncode}); {log}:\n{tail}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise KafkaUnavailable(f"Kafka did not listen on 127.0.0.1:{port} within {timeout:.0f} s; see {log}")
        time.sleep(0.2)


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM the broker, SIGKILL it after :data:`STOP_GRACE_S`; wait for it either way."""
    proc.terminate()
    try:
        proc.wait(timeout=STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
