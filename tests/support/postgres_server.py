"""A real PostgreSQL server for tests: Debian's ``postgresql`` package (``initdb``, ``pg_ctl``,
``psql``), a private cluster on a free 127.0.0.1 port, run by a non-root user.

- :func:`postgres_bin` — the folder holding ``initdb`` / ``pg_ctl`` (``pg_config --bindir``, else
  the newest ``/usr/lib/postgresql/<n>/bin``); :class:`PostgresUnavailable` says what to install
  when there is none (``make test`` installs ``postgresql``: build-support/test-prereqs.sh).
- :func:`run_postgres` — ``initdb`` (password authentication, scram-sha-256) + ``pg_ctl start``
  in a fresh folder owned by the user that runs it (``postgres`` when the tests run as root: the
  server refuses root), stopped (``pg_ctl stop -m fast``) and removed at the end.
- fixture ``postgres_server`` (session) — that server; the tests using it fail, with the reason,
  when PostgreSQL is not installed. ``python -m tests.support.postgres_server`` checks the installation.

The password reaches ``initdb`` in a file readable by the server's user only and ``psql`` in
``PGPASSWORD``: never on a command line.
"""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import pytest

from tests.support.fixtures_servers import free_port

SERVER_USER = "postgres"  # Debian's package creates it; the server runs as this user when we are root
SUPERUSER = "lakeflow"


class PostgresUnavailable(RuntimeError):
    """PostgreSQL is not installed (or cannot be run as a non-root user); the message says what to do."""


def postgres_bin() -> Path:
    """The folder of ``initdb`` and ``pg_ctl`` (Debian keeps them out of PATH)."""
    candidates = []
    pg_config = shutil.which("pg_config")
    if pg_config:
        done = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True)
        candidates.append(Path(done.stdout.strip()))
    candidates += sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: int(p.parent.name), reverse=True)
    for folder in candidates:
        if (folder / "initdb").is_file() and (folder / "pg_ctl").is_file():
            return folder
    raise PostgresUnavailable("PostgreSQL is not installed (no initdb/pg_ctl): apt-get install postgresql "
                              "(make test installs it: build-support/test-prereqs.sh)")


@dataclass(frozen=True)
class PostgresServer:
    """A running server at 127.0.0.1:``port``; ``password`` is the superuser's."""

    port: int
    user: str
    password: str = field(repr=False)
    bin: Path
    data: Path

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    def jdbc_url(self, database: str = "") -> str:
        return f"jdbc:postgresql://{self.host}/{database}"

    def sql(self, statements: str, database: str = "postgres") -> str:
        """Run ``statements`` with ``psql`` (stops at the first error); returns its output."""
        env = {**os.environ, "PGPASSWORD": self.password}
        done = subprocess.run([str(self.bin / "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-p",
                               str(self.port), "-U", self.user, "-d", database, "-At"], input=statements,
                              capture_output=True, text=True, env=env, timeout=60)
        if done.returncode != 0:
            raise RuntimeError(f"psql on {database}: {done.stderr.strip()[:500]}")
        return done.stdout

    def create_database(self, name: str) -> None:
        self.sql(f'CREATE DATABASE "{name}"')


def _as_server_user() -> tuple[list[str], int, int]:
    """The command prefix, uid and gid that run the server's programs (root may not)."""
    if os.geteuid() != 0:
        return [], os.getuid(), os.getgid()
    try:
        user = pwd.getpwnam(SERVER_USER)
    except KeyError:
        raise PostgresUnavailable(f"running as root and there is no '{SERVER_USER}' user to run PostgreSQL as "
                                  "(apt-get install postgresql creates it)") from None
    runuser = shutil.which("runuser") or shutil.which("setpriv")
    if runuser is None:
        raise PostgresUnavailable("running as root and neither runuser nor setpriv is installed (util-linux)")
    prefix = ([runuser, "-u", SERVER_USER, "--"] if runuser.endswith("runuser") else
              [runuser, f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--init-groups"])
    return prefix, user.pw_uid, user.pw_gid


@contextmanager
def run_postgres(timeout: float = 60.0) -> Iterator[PostgresServer]:
    """A fresh cluster on a free 127.0.0.1 port; stopped and removed at the end."""
    bin_dir = postgres_bin()
    prefix, uid, gid = _as_server_user()
    work = Path(tempfile.mkdtemp(prefix="lakeflow-postgres-"))
    os.chown(work, uid, gid)
    data, pwfile, log = work / "data", work / "pw", work / "postgres.log"
    password = secrets.token_urlsafe(16)
    fd = os.open(pwfile, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(password + "\n")
    os.chown(pwfile, uid, gid)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    started = False
    try:
        _check([*prefix, str(bin_dir / "initdb"), "-D", str(data), "-U", SUPERUSER, f"--pwfile={pwfile}",
                "--auth=scram-sha-256", "-E", "UTF8", "--locale=C.UTF-8", "--no-sync"], "initdb", env)
        pwfile.unlink()
        options = f"-c listen_addresses=127.0.0.1 -p {port} -k {work} -c fsync=off -c max_connections=40"
        _check([*prefix, str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(log), "-o", options, "-w", "-t",
                str(int(timeout)), "start"], f"pg_ctl start (log: {log})", env)
        started = True
        yield PostgresServer(port, SUPERUSER, password, bin_dir, data)
    finally:
        if started:
            subprocess.run([*prefix, str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"],
                           capture_output=True, env=env, timeout=60)
        shutil.rmtree(work, ignore_errors=True)


def _check(cmd: list[str], what: str, env: dict[str, str]) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120, cwd="/")
    if done.returncode != 0:
        raise PostgresUnavailable(f"{what} failed (exit {done.returncode}): {(done.stderr or done.stdout).strip()[-800:]}")


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """One PostgreSQL server for the session (superuser ``lakeflow``, database ``postgres``)."""
    with run_postgres() as server:
        yield server


def main() -> int:
    """``python -m tests.support.postgres_server``: start and stop a server once (checks the installation)."""
    began = time.monotonic()
    try:
        with run_postgres() as server:
            version = server.sql("SHOW server_version").strip()
    except PostgresUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"PostgreSQL {version} from {postgres_bin()}: started and stopped in {time.monotonic() - began:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
