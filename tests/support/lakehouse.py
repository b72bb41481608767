"""The lakehouse of the S3 tests: one URL (``LAKEKEEPER``) serving both catalogs, everything on one
moto server that checks every signature, key and IAM policy (fixture ``moto_iam``).

- ``/lakekeeper/v1``: the Lakekeeper stand-in (generic tables), vending STS credentials of a role
  allowed only the raw table's prefix;
- ``/catalog``: Apache Iceberg's REST server (tests/support/iceberg_rest.py), reached through the stand-in,
  which plays Lakekeeper's part of an Iceberg load/create-table answer (:class:`LakekeeperWithIceberg`):
  the warehouse's storage profile (endpoint, region, path style) and STS credentials of a role allowed
  only the Iceberg table's location, instead of the server's own key pair (the catalog's storage
  credential, :func:`catalog_key`, which never leaves it — as Lakekeeper's never does).

:func:`lakehouse_catalogs` assembles both (warehouse ``lakeflow``, namespace ``iot``) and yields a
:class:`Catalogs`: the environment a user's shell would hold, and the secrets that must never show.
Used by tests/integration/test_compaction_s3.py and tests/integration/test_end_to_end_s3.py.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
import requests
from werkzeug.wrappers import Request, Response

from tests.support.fixtures_lakekeeper import NAMESPACE, WAREHOUSE_NAME, env_for
from tests.support.fixtures_servers import MotoServer, run_moto
from tests.support.iceberg_rest import IcebergRestServer, ensure_server_jars, run_iceberg_rest
from tests.standins.lakekeeper import ApiError, LakekeeperStandin, S3Account, Table, _error

LAKEFLOW = str(Path(sys.executable).parent / "lakeflow")
TARGET = "sensor-readings-compacted"   # the Iceberg table lakeflow compact creates (TABLE-compacted)
# load-table (GET …/tables/{t}) and create-table (POST …/tables) answers: LoadTableResult
_LOAD_OR_CREATE = re.compile(r"^/catalog/v1/[^/]+/namespaces/([^/]+)/tables(?:/([^/]+))?$")
_OWN_KEYS = ("s3.access-key-id", "s3.secret-access-key", "s3.session-token")


class LakekeeperWithIceberg(LakekeeperStandin):
    """The stand-in with an Iceberg REST catalog at ``/catalog``: Iceberg's REST server (metadata,
    commits, conflicts) behind Lakekeeper's front — the bearer token checked, and a table's storage
    access vended as Lakekeeper vends it (``_config_keys``, ``_vend``: STS, role per table location)."""

    iceberg_url = ""

    def __call__(self, environ: dict, start_response: Callable) -> Any:
        request = Request(environ)
        # /catalog/v1/config is Lakekeeper's own (warehouse names resolved): answered by the stand-in
        if not (self.iceberg_url and request.path.startswith("/catalog/")) or request.path == "/catalog/v1/config":
            return super().__call__(environ, start_response)
        body = request.get_data(cache=True)
        try:
            self._authenticate(request)
            response = self._forward(request, body)
        except ApiError as exc:
            response = _error(exc.code, exc.type, exc.message, exc.stack)
        self._record(request, body, response.status_code)
        return response(environ, start_response)

    def _forward(self, request: Request, body: bytes) -> Response:
        raw = request.environ.get("RAW_URI") or request.environ.get("REQUEST_URI") or request.full_path
        headers = {k: v for k, v in request.headers.items()
                   if k.lower() not in ("host", "content-length", "authorization", "connection")}
        try:
            answer = requests.request(request.method, self.iceberg_url + raw, headers=headers, data=body, timeout=30)
        except requests.ConnectionError:  # the catalog behind is down (make soak restarts it): Lakekeeper's 503
            raise ApiError(503, "ServiceUnavailableException", "the Iceberg catalog is not reachable") from None
        route = _LOAD_OR_CREATE.match(request.path)
        load = route is not None and request.method == "GET" and route.group(2) is not None
        create = route is not None and request.method == "POST" and route.group(2) is None
        if not (load or create) or answer.status_code != 200:
            return Response(answer.content, status=answer.status_code,
                            content_type=answer.headers.get("Content-Type", "application/json"))
        result = answer.json()
        assert self.warehouse is not None
        wh, meta = self.warehouse, result["metadata"]
        config = {k: v for k, v in (result.get("config") or {}).items() if k not in _OWN_KEYS}
        config.update(self._config_keys(wh))
        result.pop("storage-credentials", None)
        if "vended-credentials" in request.headers.get("X-Iceberg-Access-Delegation", ""):
            namespace = tuple(route.group(1).split("\x1f"))
            name = route.group(2) if load else json.loads(body)["name"]
            table = Table(meta["table-uuid"], namespace, name, "iceberg", meta["location"])
            cred = self._vend(wh, table)
            config.update({k: v for k, v in cred["config"].items() if "expir" not in k})
            result["storage-credentials"] = [cred]
            with self._lock:
                wh.iceberg_tables.add((namespace, table.name))
        result["config"] = config
        return Response(json.dumps(result), status=200, content_type="application/json")


def catalog_key(admin: S3Account, bucket: str, prefix: str) -> tuple[str, str]:
    """The Iceberg catalog's own storage credential: an IAM user allowed S3 under ``bucket/prefix/``."""
    iam, user = admin.client("iam"), f"iceberg-rest-{uuid.uuid4().hex[:8]}"
    iam.create_user(UserName=user)
    iam.put_user_policy(UserName=user, PolicyName="warehouse", PolicyDocument=json.dumps(
        {"Version": "2012-10-17",
         "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": [f"arn:aws:s3:::{bucket}/{prefix}/*"]},
                       {"Effect": "Allow", "Action": "s3:ListBucket", "Resource": [f"arn:aws:s3:::{bucket}"]}]}))
    key = iam.create_access_key(UserName=user)["AccessKey"]
    return key["AccessKeyId"], key["SecretAccessKey"]


@pytest.fixture(scope="module")
def moto_iam(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Account]:
    """moto with signatures and IAM policies enforced (as ``moto_strict``), DeleteObjects authorised per
    key as AWS does (tests/standins/moto_server.py); yields Lakekeeper's own storage credential (IAM user)."""
    with run_moto(tmp_path_factory.mktemp("moto-iam"), strict_bootstrap_calls=3) as moto:
        iam = moto.client("iam")                         # the 3 unauthenticated bootstrap calls
        iam.create_user(UserName="lakekeeper")
        iam.put_user_policy(UserName="lakekeeper", PolicyName="all", PolicyDocument=json.dumps(
            {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}))
        key = iam.create_access_key(UserName="lakekeeper")["AccessKey"]
        yield S3Account(moto.url, moto.region, key["AccessKeyId"], key["SecretAccessKey"])


@dataclass
class Catalogs:
    """Both catalogs at ``standin.url`` (warehouse ``lakeflow``, namespace ``iot``) and lakeflow's
    environment pointing at them, as a user's shell holds it (``LAKEKEEPER``, ``WAREHOUSE_ID``,
    ``TOKEN``, ``LAKEFLOW_HOME``; no caller's AWS or lakeflow settings)."""

    standin: LakekeeperWithIceberg
    iceberg: IcebergRestServer
    admin: S3Account            # Lakekeeper's own storage credential: for inspecting the bucket only
    env: dict
    home: Path

    def secrets(self) -> list[str]:
        """The bearer token, every storage key's secret and every vended secret key and session token."""
        return [self.standin.token, self.iceberg.secret_key, self.admin.secret_key, *self.standin.vended_secrets]

    def assert_no_secret(self, text: str) -> None:
        for secret in self.secrets():
            assert secret not in text

    def lakeflow(self, *args: str, env: dict | None = None, log: Path | None = None,
                 timeout: float = 300) -> subprocess.CompletedProcess:
        """``lakeflow ARGS`` as a user runs it (cwd: LAKEFLOW_HOME's parent); fails the test with its
        output (kept in ``log``) unless it exits 0; no secret in what it printed."""
        cmd = [LAKEFLOW, *args]
        done = subprocess.run(cmd, env=env or self.env, cwd=self.home.parent, capture_output=True, text=True,
                              timeout=timeout)
        if done.returncode != 0:
            where = ""
            if log is not None:
                log.write_text(done.stdout + done.stderr)
                where = f" (all of it: {log})"
            lines = [line for line in done.stderr.splitlines() if not line.lstrip().startswith("at ")]
            pytest.fail(f"lakeflow {args[0]} exited {done.returncode}{where}:\n" + "\n".join(lines[-60:]))
        self.assert_no_secret(done.stdout + done.stderr + " ".join(cmd))
        return done


@contextmanager
def lakehouse_catalogs(s3: S3Account, tmp_path: Path) -> Iterator[Catalogs]:
    """The stand-in (a fresh warehouse bucket on ``s3``, namespace ``iot``) with Iceberg's REST server
    behind ``/catalog``, whose warehouse is Lakekeeper's and whose own key is scoped to it; LAKEFLOW_HOME
    is ``tmp_path/home``. The stand-in's OpenAPI contract is checked when the block ends."""
    ensure_server_jars()
    standin = LakekeeperWithIceberg(s3).start()
    try:
        wh = standin.add_warehouse(WAREHOUSE_NAME)
        standin.create_namespace(NAMESPACE)
        access_key, secret_key = catalog_key(s3, wh.bucket, wh.key_prefix)
        with run_iceberg_rest(MotoServer(s3.endpoint, s3.region), access_key, secret_key, wh.base,
                              tmp_path / "iceberg-rest", prefix=wh.id) as server:
            standin.iceberg_url = server.url
            home = tmp_path / "home"
            env = {**{k: v for k, v in os.environ.items()
                      if not k.startswith(("LAKEFLOW_", "COMPACT_", "OAUTH_", "AWS_", "LAKEKEEPER", "TOKEN"))},
                   **env_for(standin), "LAKEFLOW_HOME": str(home)}
            yield Catalogs(standin=standin, iceberg=server, admin=s3, env=env, home=home)
    finally:
        standin.stop()
    assert not standin.violations, "OpenAPI contract violations:\n" + "\n".join(standin.violations)
