"""A real Iceberg REST catalog for the Lakekeeper route of compaction: Apache Iceberg's REST test
server (``org.apache.iceberg:iceberg-open-api:<v>:test-fixtures``, what the apache/iceberg-rest-fixture
image runs) on a JVM, its warehouse on a moto S3 bucket with IAM enforcement on.

- :func:`ensure_server_jars` — the server's classpath, cached in ``build/iceberg-rest/``: Maven
  resolves ``build-support/iceberg-rest/pom.xml`` from Maven Central (``--strict-checksums``) when the
  jars are missing or the pom changed; ``javac`` compiles the small launcher
  (``build-support/iceberg-rest/RESTCatalogTestServer.java``: 127.0.0.1, ``/catalog`` context path,
  REST prefix). ``python -m tests.support.iceberg_rest`` (``make iceberg-rest``) does the same.
- :func:`run_iceberg_rest` — the server on a free 127.0.0.1 port, configured like the image
  (``CATALOG_*`` variables): JDBC catalog (SQLite file), ``S3FileIO`` on moto (path-style), and the
  catalog's S3 keys vended in every load-table response (``include-credentials``).
- fixture ``iceberg_rest`` (session) — that server on its own strict moto; the tests using it fail,
  with the reason, when the jars cannot be had (offline without a cache).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

import pytest
import requests

from lakeflow.runtime import maven
from tests.support.fixtures_servers import MotoServer, free_port, run_moto, stop_process

ROOT = Path(__file__).resolve().parents[2]
SUPPORT = ROOT / "build-support" / "iceberg-rest"
POM = SUPPORT / "pom.xml"
LAUNCHER = SUPPORT / "RESTCatalogTestServer.java"
CACHE = ROOT / "build" / "iceberg-rest"
MAIN_CLASS = "org.apache.iceberg.rest.RESTCatalogTestServer"
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
ARTIFACTS = ("org.apache.iceberg:iceberg-open-api:1.11.0:test-fixtures, iceberg-core:1.11.0 (+ :tests), "
             "iceberg-aws:1.11.0, software.amazon.awssdk:s3/kms/sts:2.44.4, "
             "org.eclipse.jetty.ee10:jetty-ee10-servlet:12.1.8, org.xerial:sqlite-jdbc:3.53.0.0, "
             "org.slf4j:slf4j-simple:2.0.17 (build-support/iceberg-rest/pom.xml)")
JVM_OPTIONS = ("-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss512k")
PREFIX = "0190e2a4-5b3c-7d6e-8f90-a1b2c3d4e5f6"   # served at /catalog/v1/{prefix}/…, as Lakekeeper's warehouse id
WAREHOUSE_NAME = "lakeflow"
BUCKET = "iceberg-rest-warehouse"
# strict moto: these first calls are unauthenticated (create_user, put_user_policy, create_access_key)
_BOOTSTRAP_CALLS = 3


class IcebergRestUnavailable(RuntimeError):
    """The server's jars are neither cached nor fetchable (or Java is missing); the message says which."""


def _digest(*paths: Path) -> str:
    return hashlib.sha256(b"".join(p.read_bytes() for p in paths)).hexdigest()[:16]


def _run(cmd: Sequence[str], what: str, timeout: float) -> None:
    try:
        done = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise IcebergRestUnavailable(f"{what}: {exc}") from exc
    if done.returncode != 0:
        lines = re.sub(r"\x1b\[[0-9;]*m", "", done.stdout + done.stderr).splitlines()
        errors = [t for t in (line.removeprefix("[ERROR]").strip() for line in lines if line.startswith("[ERROR]"))
                  if t and not t.startswith(("->", "[Help", "Re-run", "For more", "To see the full"))]
        raise IcebergRestUnavailable(f"{what} failed (exit {done.returncode}): "
                                     + " | ".join((errors or lines[-4:])[:4]))


def _resolve(jars: Path, mvn: Sequence[str]) -> None:
    """Fill ``jars`` with the pom's runtime classpath (Maven's own repository is temporary)."""
    with tempfile.TemporaryDirectory(dir=jars.parent, prefix=".resolve-") as tmp:
        out = Path(tmp) / "jars"
        _run([*mvn, "-B", "-q", "--strict-checksums", "-f", str(POM), f"-Dmaven.repo.local={tmp}/m2",
              f"{DEPENDENCY_PLUGIN}:copy-dependencies", "-DincludeScope=runtime", f"-DoutputDirectory={out}"],
             f"cannot fetch the Iceberg REST server's jars from Maven Central. Needed: {ARTIFACTS}. "
             f"Run `make iceberg-rest` where Maven Central is reachable and copy {jars}/ here; Maven",
             timeout=1800)
        (out / ".pom-digest").write_text(_digest(POM))
        shutil.rmtree(jars, ignore_errors=True)
        out.rename(jars)


def _compile(classes: Path, jars: Path) -> None:
    """Compile the launcher into ``classes`` against ``jars``."""
    javac = shutil.which("javac", path=_java_path())
    if javac is None:
        raise IcebergRestUnavailable("javac (JDK 17+) not found: needed to compile " + str(LAUNCHER))
    with tempfile.TemporaryDirectory(dir=classes.parent, prefix=".javac-") as tmp:
        out = Path(tmp) / "classes"
        _run([javac, "--release", "17", "-nowarn", "-cp", f"{jars}/*", "-d", str(out), str(LAUNCHER)],
             f"javac {LAUNCHER.name}", timeout=300)
        (out / ".source-digest").write_text(_digest(LAUNCHER, jars / ".pom-digest"))
        shutil.rmtree(classes, ignore_errors=True)
        out.rename(classes)


def _java_path() -> str:
    home = os.environ.get("JAVA_HOME")
    return os.pathsep.join(([str(Path(home) / "bin")] if home else []) + [os.environ.get("PATH", "")])


def _current(marker: Path, digest: str) -> bool:
    return marker.is_file() and marker.read_text() == digest


def ensure_server_jars(cache: Path = CACHE, mvn: Sequence[str] | None = None) -> list[Path]:
    """The server's classpath (launcher classes first, then the jars); resolves the jars with Maven
    when they are missing or the pom changed, and compiles the launcher when it changed."""
    cache.mkdir(parents=True, exist_ok=True)
    jars, classes = cache / "jars", cache / "classes"
    with open(cache / ".lock", "w") as lock:      # one resolver at a time (parallel test sessions)
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not _current(jars / ".pom-digest", _digest(POM)):
            try:
                mvn = mvn or (maven.mvn(),)  # mvn on PATH, else Maven fetched from Maven Central
            except maven.MavenUnavailable as exc:
                raise IcebergRestUnavailable(f"{exc}: cannot fetch {ARTIFACTS}") from None
            if shutil.which(mvn[0]) is None:
                raise IcebergRestUnavailable(f"Maven ({mvn[0]}) not found: cannot fetch {ARTIFACTS}")
            _resolve(jars, mvn)
        if not _current(classes / ".source-digest", _digest(LAUNCHER, jars / ".pom-digest")):
            _compile(classes, jars)
    return [classes, *sorted(jars.glob("*.jar"))]


@dataclass(frozen=True)
class IcebergRestServer:
    """A running server. ``url`` is what LAKEKEEPER would be: the catalog answers at ``{url}/catalog``."""

    url: str
    prefix: str
    warehouse: str           # the catalog's warehouse location, s3://BUCKET/warehouse
    s3: MotoServer
    access_key: str          # the catalog's S3 key pair (vended in load-table responses)
    secret_key: str
    log: Path

    @property
    def catalog_url(self) -> str:
        return f"{self.url}/catalog"


def server_env(s3: MotoServer, warehouse: str, access_key: str, secret_key: str, port: int,
               jdbc_file: Path, prefix: str) -> dict[str, str]:
    """The server's environment: the image's ``CATALOG_*`` settings (``__`` → ``-``, ``_`` → ``.``)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("CATALOG_", "AWS_"))}
    return {**base,
            "CATALOG_URI": f"jdbc:sqlite:{jdbc_file}",
            "CATALOG_WAREHOUSE": warehouse,
            "CATALOG_IO__IMPL": "org.apache.iceberg.aws.s3.S3FileIO",
            "CATALOG_S3_ENDPOINT": s3.url,
            "CATALOG_S3_PATH__STYLE__ACCESS": "true",
            "CATALOG_S3_ACCESS__KEY__ID": access_key,
            "CATALOG_S3_SECRET__ACCESS__KEY": secret_key,
            "CATALOG_CLIENT_REGION": s3.region,
            "CATALOG_INCLUDE__CREDENTIALS": "true",
            "CATALOG_REST_HOST": "127.0.0.1",
            "CATALOG_REST_PORT": str(port),
            "CATALOG_REST_CONTEXT__PATH": "/catalog",
            "CATALOG_REST_PREFIX": prefix}


@contextmanager
def run_iceberg_rest(s3: MotoServer, access_key: str, secret_key: str, warehouse: str, log_dir: Path, *,
                     prefix: str = PREFIX, timeout: float = 60.0, port: int | None = None) -> Iterator[IcebergRestServer]:
    """The REST server on a free 127.0.0.1 port (or ``port``) with its warehouse at ``warehouse`` on ``s3``;
    returns once ``GET /catalog/v1/config`` answers 200, stops the JVM at the end. Its catalog (SQLite) is
    named by the port: started again on the same port and ``log_dir``, it finds its tables again."""
    java = shutil.which("java", path=_java_path())
    if java is None:
        raise IcebergRestUnavailable("java (17+) not found on PATH or in JAVA_HOME")
    classpath = os.pathsep.join(map(str, ensure_server_jars()))
    port = port or free_port()
    log_dir.mkdir(parents=True, exist_ok=True)
    log = log_dir / f"iceberg-rest-{port}.log"
    env = server_env(s3, warehouse, access_key, secret_key, port, log_dir / f"catalog-{port}.db", prefix)
    with open(log, "wb") as out:
        proc = subprocess.Popen([java, *JVM_OPTIONS, "-cp", classpath, MAIN_CLASS], stdout=out,
                                stderr=subprocess.STDOUT, env=env, cwd=log_dir)
    server = IcebergRestServer(f"http://127.0.0.1:{port}", prefix, warehouse, s3, access_key, secret_key, log)
    try:
        _wait_ready(f"{server.catalog_url}/v1/config", proc, log, timeout)
        yield server
    finally:
        stop_process(proc)


def _wait_ready(url: str, proc: subprocess.Popen, log: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"the Iceberg REST server exited ({proc.returncode}); {log}:\n"
                               + log.read_text(errors="replace")[-3000:])
        try:
            if requests.get(url, timeout=2).status_code == 200:
                return
        except requests.RequestException:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"the Iceberg REST server did not answer {url} within {timeout}s; see {log}")
        time.sleep(0.1)


def bootstrap_s3(moto: MotoServer, bucket: str) -> tuple[str, str]:
    """On a strict moto: an IAM user allowed S3 on ``bucket`` only, its key pair, and the bucket
    (created with that key: the first signed call)."""
    iam = moto.client("iam")
    iam.create_user(UserName="iceberg-rest")
    iam.put_user_policy(UserName="iceberg-rest", PolicyName="warehouse", PolicyDocument=json.dumps(
        {"Version": "2012-10-17",
         "Statement": [{"Effect": "Allow", "Action": "s3:*",
                        "Resource": [f"arn:aws:s3:::{bucket}", f"arn:aws:s3:::{bucket}/*"]}]}))
    key = iam.create_access_key(UserName="iceberg-rest")["AccessKey"]
    access_key, secret_key = key["AccessKeyId"], key["SecretAccessKey"]
    moto.client("s3", aws_access_key_id=access_key, aws_secret_access_key=secret_key).create_bucket(Bucket=bucket)
    return access_key, secret_key


@pytest.fixture(scope="session")
def iceberg_rest(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IcebergRestServer]:
    """Iceberg's REST server at ``{url}/catalog`` (prefix :data:`PREFIX`), warehouse
    ``s3://iceberg-rest-warehouse/warehouse`` on its own moto with signatures and IAM enforced."""
    ensure_server_jars()  # fails (never skips) the tests that need it when the jars cannot be had
    logs = tmp_path_factory.mktemp("iceberg-rest")
    with run_moto(logs, strict_bootstrap_calls=_BOOTSTRAP_CALLS) as moto:
        access_key, secret_key = bootstrap_s3(moto, BUCKET)
        with run_iceberg_rest(moto, access_key, secret_key, f"s3://{BUCKET}/warehouse", logs) as server:
            yield server


def main() -> int:
    """``python -m tests.support.iceberg_rest``: fetch (if missing) and list the server's classpath."""
    started = time.monotonic()
    try:
        classpath = ensure_server_jars()
    except IcebergRestUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    size = sum(p.stat().st_size for p in classpath if p.is_file())
    print(f"Iceberg REST server: {len(classpath) - 1} jars, {size / 1e6:.1f} MB in {CACHE / 'jars'} "
          f"({time.monotonic() - started:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
