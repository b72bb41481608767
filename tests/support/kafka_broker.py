"""A real Apache Kafka broker for tests: Kafka 4.1.1 from Maven Central as one KRaft node
(broker and controller) on 127.0.0.1.

- :func:`ensure_kafka_jars` — Kafka's runtime classpath, cached in ``build/kafka/jars``: Maven
  resolves ``build-support/kafka/pom.xml`` from Maven Central (``--strict-checksums``) when the jars
  are missing or the pom changed. ``python -m tests.support.kafka_broker`` does the same.
- :func:`run_kafka` — a broker on free ports (log dir formatted by ``kafka.tools.StorageTool``),
  stopped at the end; :meth:`KafkaBroker.create_topic` (``TopicCommand``) and
  :meth:`KafkaBroker.produce` (``ConsoleProducer``) use Kafka's own tools.
- fixture ``kafka_broker`` (session) — that broker; the tests using it fail, with the reason, when
  Java or the jars cannot be had.
"""

from __future__ import annotations

import base64
import fcntl
import hashlib
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

import pytest

from lakeflow.runtime import maven
from tests.support.fixtures_servers import free_port, stop_process

ROOT = Path(__file__).resolve().parents[2]
POM = ROOT / "build-support" / "kafka" / "pom.xml"
CACHE = ROOT / "build" / "kafka"
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
ARTIFACTS = "org.apache.kafka:kafka_2.13:4.1.1 + kafka-tools:4.1.1 (build-support/kafka/pom.xml)"
JVM_OPTIONS = ("-Xmx384m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
TOOL_JVM_OPTIONS = ("-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")


class KafkaUnavailable(RuntimeError):
    """Kafka's jars are neither cached nor fetchable, or Java is missing; the message says which."""


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


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    path = os.pathsep.join(([str(Path(home) / "bin")] if home else []) + [os.environ.get("PATH", "")])
    java = shutil.which("java", path=path)
    if java is None:
        raise KafkaUnavailable("java (17+) not found on PATH or in JAVA_HOME: needed to run Kafka")
    return java


def ensure_kafka_jars(cache: Path = CACHE, mvn: str | None = None) -> list[Path]:
    """Kafka's runtime jars; resolved with Maven when missing or when the pom changed."""
    cache.mkdir(parents=True, exist_ok=True)
    jars = cache / "jars"
    digest = hashlib.sha256(POM.read_bytes()).hexdigest()[:16]
    with open(cache / ".lock", "w") as lock:  # one resolver at a time (parallel test sessions)
        fcntl.flock(lock, fcntl.LOCK_EX)
        marker = jars / ".pom-digest"
        if not (marker.is_file() and marker.read_text() == digest):
            try:
                mvn = mvn or maven.mvn()  # mvn on PATH, else Maven fetched from Maven Central
            except maven.MavenUnavailable as exc:
                raise KafkaUnavailable(f"{exc}: cannot fetch {ARTIFACTS}") from None
            with tempfile.TemporaryDirectory(dir=cache, prefix=".resolve-") as tmp:
                out = Path(tmp) / "jars"
                _run([mvn, "-B", "-q", "--strict-checksums", "-f", str(POM), f"-Dmaven.repo.local={tmp}/m2",
                      f"{DEPENDENCY_PLUGIN}:copy-dependencies", "-DincludeScope=runtime",
                      f"-DoutputDirectory={out}"],
                     f"cannot fetch Kafka's jars from Maven Central. Needed: {ARTIFACTS}. Run "
                     f"`python -m tests.support.kafka_broker` where Maven Central is reachable and copy {jars}/ here; Maven",
                     timeout=1800)
                (out / ".pom-digest").write_text(digest)
                shutil.rmtree(jars, ignore_errors=True)
                out.rename(jars)
    return sorted(jars.glob("*.jar"))


@dataclass(frozen=True)
class KafkaBroker:
    """A running broker: clients connect to ``bootstrap`` (``127.0.0.1:<port>``)."""

    bootstrap: str
    classpath: str
    log: Path

    def _tool(self, main_class: str, *args: str, stdin: str | None = None, timeout: float = 60.0) -> str:
        return _run([_java(), *TOOL_JVM_OPTIONS, "-cp", self.classpath, main_class, *args],
                    f"{main_class} {' '.join(args)}", timeout, stdin)

    def create_topic(self, name: str, partitions: int = 1) -> None:
        self._tool("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", self.bootstrap, "--create",
                   "--if-not-exists", "--topic", name, "--partitions", str(partitions), "--replication-factor", "1")

    def topics(self) -> list[str]:
        out = self._tool("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", self.bootstrap, "--list")
        return sorted(line.strip() for line in out.splitlines() if line.strip())

    def produce(self, topic: str, records: Sequence[str]) -> None:
        """Write ``records`` (one line each) to ``topic`` with Kafka's console producer."""
        self._tool("org.apache.kafka.tools.ConsoleProducer", "--bootstrap-server", self.bootstrap, "--topic", topic,
                   stdin="".join(f"{r}\n" for r in records))


def server_properties(port: int, controller_port: int, log_dirs: Path) -> str:
    return "\n".join([
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
    ])


@contextmanager
def run_kafka(work: Path, timeout: float = 60.0) -> Iterator[KafkaBroker]:
    """A KRaft broker + controller on free 127.0.0.1 ports with its data under ``work``; returns
    once it accepts connections and answers a topic listing, stops the JVM at the end."""
    java = _java()
    classpath = os.pathsep.join(map(str, ensure_kafka_jars()))
    port, controller_port = free_port(), free_port()
    work.mkdir(parents=True, exist_ok=True)
    props = work / "server.properties"
    props.write_text(server_properties(port, controller_port, work / "data"))
    cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    _run([java, *TOOL_JVM_OPTIONS, "-cp", classpath, "kafka.tools.StorageTool", "format", "-t", cluster_id,
          "-c", str(props)], "kafka-storage format", timeout=120)
    log = work / "kafka.log"
    env = {**os.environ, "LOG_DIR": str(work)}
    with open(log, "wb") as out:
        proc = subprocess.Popen([java, *JVM_OPTIONS, "-cp", classpath, "kafka.Kafka", str(props)], stdout=out,
                                stderr=subprocess.STDOUT, env=env, cwd=work)
    broker = KafkaBroker(f"127.0.0.1:{port}", classpath, log)
    try:
        _wait_ready(port, proc, log, timeout)
        broker.topics()  # the broker answers metadata requests
        yield broker
    finally:
        stop_process(proc)


def _wait_ready(port: int, proc: subprocess.Popen, log: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"Kafka exited ({proc.returncode}); {log}:\n" + log.read_text(errors="replace")[-3000:])
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"Kafka did not listen on 127.0.0.1:{port} within {timeout}s; see {log}")
        time.sleep(0.2)


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    """One Kafka 4.1.1 KRaft broker for the session (``kafka_broker.bootstrap``)."""
    ensure_kafka_jars()  # fails (never skips) the tests that need it when the jars cannot be had
    with run_kafka(tmp_path_factory.mktemp("kafka")) as broker:
        yield broker


def main() -> int:
    """``python -m tests.support.kafka_broker``: fetch (if missing) and list Kafka's classpath."""
    started = time.monotonic()
    try:
        jars = ensure_kafka_jars()
    except KafkaUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    size = sum(p.stat().st_size for p in jars)
    print(f"Kafka: {len(jars)} jars, {size / 1e6:.1f} MB in {CACHE / 'jars'} ({time.monotonic() - started:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
