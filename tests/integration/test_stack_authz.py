"""``lakeflow stack bootstrap`` as a user runs it (a subprocess) against Lakekeeper with OpenFGA
authorization: the management and Lakekeeper stand-ins behind one URL sharing one authorizer
(tests/support/lakehouse.py :class:`LakekeeperServer`, tests/standins/authz.py), principals from the
OAuth stand-in, S3 and STS from moto's server. It bootstraps a new server as the admin, gives each
job exactly its grants, writes one env file per job with which each job does its work and the
other principal nothing; a rerun changes nothing; another principal is refused.

The unit tests (no process, a fake built from the recorded answers): tests/unit/test_stack_authz.py.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Iterator

import pytest
from dotenv import dotenv_values

from tests.standins.authz import Authorizer
from tests.standins.lakekeeper import LakekeeperStandin, S3Account, namespace_object, table_object
from tests.standins.management import ManagementStandin
from tests.standins.oauth import OAuthStandin
from tests.support.fixtures_servers import MotoServer
from tests.support.lakehouse import LakekeeperServer
from tests.unit.test_stack_authz import COMPACT, INGEST

LAKEFLOW = str(Path(sys.executable).parent / "lakeflow")
JOBS = ("lf-ingest", "lf-compact")


@pytest.fixture
def oauth() -> Iterator[OAuthStandin]:
    standin = OAuthStandin(client_id="admin").start()
    for client in (*JOBS, "lf-other"):
        standin.add_client(client)
    yield standin
    standin.stop()


@pytest.fixture
def server(moto_server: MotoServer, oauth: OAuthStandin) -> Iterator[LakekeeperServer]:
    """A Lakekeeper with OpenFGA, not bootstrapped, no warehouse."""
    authz = Authorizer(oauth.subject_of)
    standin = LakekeeperStandin(S3Account(moto_server.url, moto_server.region))
    standin.authz = authz
    lakekeeper = LakekeeperServer(standin, ManagementStandin(authz=authz)).start()
    yield lakekeeper
    lakekeeper.stop()
    violations = standin.violations + lakekeeper.management.violations
    assert not violations, "OpenAPI contract violations:\n" + "\n".join(violations)


def stack_env(server: LakekeeperServer, oauth: OAuthStandin, tmp_path: Path, admin: str = "admin") -> dict[str, str]:
    s3 = server.lakekeeper.s3
    return {
        "PATH": os.environ["PATH"], "LAKEFLOW_ENV_FILE": os.devnull, "LAKEFLOW_HOME": str(tmp_path / "home"),
        "STACK_LAKEKEEPER_URL": server.url, "STACK_OAUTH_TOKEN_URL": oauth.token_url,
        "STACK_OAUTH_CLIENT_ID": admin, "STACK_OAUTH_CLIENT_SECRET": oauth.clients[admin],
        "STACK_INGEST_CLIENT_ID": "lf-ingest", "STACK_INGEST_CLIENT_SECRET": oauth.clients["lf-ingest"],
        "STACK_COMPACT_CLIENT_ID": "lf-compact", "STACK_COMPACT_CLIENT_SECRET": oauth.clients["lf-compact"],
        "STACK_WAREHOUSE": "lakeflow", "STACK_BUCKET": f"lk-{uuid.uuid4().hex[:12]}", "STACK_KEY_PREFIX": "warehouse",
        "STACK_S3_ENDPOINT": s3.endpoint, "STACK_S3_REGION": s3.region, "STACK_S3_ACCESS_KEY_ID": s3.access_key,
        "STACK_S3_SECRET_ACCESS_KEY": s3.secret_key, "NAMESPACE": "iot",
    }


def lakeflow(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([LAKEFLOW, *args], env=env, capture_output=True, text=True, timeout=120)


def bootstrap(env: dict[str, str], jobs: Path) -> subprocess.CompletedProcess:
    """The command with the ``STACK_*`` of ``env`` only (an empty ``--env-file``)."""
    empty = jobs.parent / "empty-stack.env"
    empty.touch()
    return lakeflow(env, "stack", "bootstrap", "--env-file", str(empty), "--wait", "10", "--write-env-dir", str(jobs))


def grants(authz: Authorizer, obj: str) -> set[tuple[str, str]]:
    return {(a["type"], a["user"]) for a in authz.assignments(obj)}


def test_each_job_gets_exactly_what_it_needs_and_works_with_its_own_file(server, oauth, tmp_path):
    env, jobs = stack_env(server, oauth, tmp_path), tmp_path / "jobs"
    done = bootstrap(env, jobs)
    assert done.returncode == 0, done.stdout + done.stderr
    authz, warehouse = server.lakekeeper.authz, server.lakekeeper.warehouse
    assert authz.holds(authz.server, "admin", "user:oidc~admin"), "the admin bootstrapped the server"

    namespace = namespace_object(warehouse.namespace_ids[("iot",)])
    raw = table_object(warehouse.id, warehouse.tables[(("iot",), "sensor-readings")].id, generic=True)
    assert grants(authz, namespace) == {("ownership", "oidc~admin"), ("create", INGEST), ("create", COMPACT)}
    assert grants(authz, raw) == {("ownership", INGEST), ("select", COMPACT)}
    for secret in oauth.clients.values():
        assert secret not in done.stdout + done.stderr

    for job, client in (("ingest", "lf-ingest"), ("compact", "lf-compact")):
        path = jobs / f"{job}.env"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert dotenv_values(path)["OAUTH_CLIENT_ID"] == client
        assert oauth.clients["admin"] not in path.read_text()

    # each job with its own file: the ingestion registers (it owns the table), the compaction vends
    # read-only credentials of it; a principal without grants sees nothing
    as_ingest = {**env, "LAKEFLOW_ENV_FILE": str(jobs / "ingest.env")}
    as_compact = {**env, "LAKEFLOW_ENV_FILE": str(jobs / "compact.env")}
    registered = lakeflow(as_ingest, "register")
    assert registered.returncode == 0 and "already registered: iot.sensor-readings" in registered.stderr, \
        registered.stderr
    vended = lakeflow(as_compact, "vend")
    assert vended.returncode == 0 and "fs.s3a.access.key" in vended.stdout, vended.stderr
    other = dotenv_values(jobs / "compact.env")
    other.update(OAUTH_CLIENT_ID="lf-other", OAUTH_CLIENT_SECRET=oauth.clients["lf-other"])
    (tmp_path / "other.env").write_text("".join(f"{k}={v}\n" for k, v in other.items() if v is not None))
    refused = lakeflow({**env, "LAKEFLOW_ENV_FILE": str(tmp_path / "other.env")}, "vend")
    assert refused.returncode == 2 and "does not exist" in refused.stderr

    # a rerun finds every grant and writes none
    again = bootstrap(env, jobs)
    assert again.returncode == 0, again.stderr
    assert ": made" not in again.stdout and "server: already bootstrapped" in again.stdout
    assert f"grant select on table iot.sensor-readings to the compaction {COMPACT}: found" in again.stdout
    assert grants(authz, raw) == {("ownership", INGEST), ("select", COMPACT)}


def test_a_principal_that_is_not_the_admin_is_refused_and_nothing_changes(server, oauth, tmp_path):
    assert bootstrap(stack_env(server, oauth, tmp_path), tmp_path / "jobs").returncode == 0
    management = server.management
    before = len(management.calls)
    refused = bootstrap(stack_env(server, oauth, tmp_path, admin="lf-other"), tmp_path / "other-jobs")
    assert refused.returncode == 2
    err = refused.stderr.strip()
    assert "\n" not in err and "Traceback" not in err
    assert "STACK_OAUTH_CLIENT_ID lf-other (no user of this server yet) is not the admin" in err
    assert [c for c in management.calls[before:] if c.method != "GET"] == [], "nothing was changed"
    assert not (tmp_path / "other-jobs").exists()
