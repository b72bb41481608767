"""Fixtures for anything that talks to Lakekeeper or an OAuth2 provider (real sockets, 127.0.0.1).

- ``lakekeeper``: a started :class:`~tests.standins.lakekeeper.LakekeeperStandin` with warehouse
  ``lakeflow`` and namespace ``iot``, vending STS credentials from the session's ``moto_server``.
  Attributes: ``.url``, ``.warehouse_id``, ``.warehouse_name``, ``.warehouse``, ``.token``,
  ``.faults``, ``.requests`` / ``.calls()``, ``.violations`` (must be empty at teardown).
- ``oauth``: a token endpoint (:class:`~tests.standins.oauth.OAuthStandin`), 300 s tokens.
- ``moto_strict``: a second moto server that enforces signatures and IAM policies
  (an :class:`~tests.standins.lakekeeper.S3Account` holding Lakekeeper's storage credential).
- ``make_lakekeeper(s3=..., **kwargs)``: more stand-ins (e.g. on ``moto_strict``).
- ``settings_for(lakekeeper, **env)`` / ``env_for(lakekeeper, **env)``: Settings / an environment
  for the CLI pointing at a stand-in (TOKEN set, no ``.env.local`` read); ``env`` overrides.
"""

from __future__ import annotations

import json
import os
from typing import Callable, Iterator, Optional

import boto3
import pytest

from lakeflow.settings import Settings, load_settings
from tests.support.fixtures_servers import MotoServer, run_moto
from tests.standins.lakekeeper import LakekeeperStandin, S3Account
from tests.standins.oauth import OAuthStandin

WAREHOUSE_NAME = "lakeflow"
NAMESPACE = ("iot",)
# moto_strict's unauthenticated bootstrap: create_user, put_user_policy, create_access_key.
_STRICT_BOOTSTRAP_CALLS = 3


def start_lakekeeper(s3: S3Account, *, warehouse: str = WAREHOUSE_NAME,
                     namespaces: tuple[tuple[str, ...], ...] = (NAMESPACE,), **kwargs) -> LakekeeperStandin:
    """A started stand-in with one warehouse (a fresh bucket on ``s3``) and its namespaces."""
    standin = LakekeeperStandin(s3, **kwargs).start()
    standin.add_warehouse(warehouse)
    for levels in namespaces:
        standin.create_namespace(levels)
    return standin


def env_for(lakekeeper: LakekeeperStandin, **overrides: str) -> dict[str, str]:
    """Environment variables that point lakeflow at ``lakekeeper`` (no ``.env.local`` read)."""
    env = {
        "LAKEKEEPER": lakekeeper.url,
        "WAREHOUSE_ID": lakekeeper.warehouse_id,
        "TOKEN": lakekeeper.token,
        "NAMESPACE": ".".join(NAMESPACE),
        "TABLE": "sensor-readings",
        "HTTP_TIMEOUT_S": "10",
        "HTTP_MAX_RETRIES": "3",
        "LAKEFLOW_ENV_FILE": os.devnull,
    }
    env.update(overrides)
    return {k: v for k, v in env.items() if v is not None}


def settings_for(lakekeeper: LakekeeperStandin, **overrides: str) -> Settings:
    """Settings that point lakeflow at ``lakekeeper``; keyword arguments override variables."""
    return load_settings(env_for(lakekeeper, **overrides))


def _verify(standin: LakekeeperStandin) -> None:
    standin.stop()
    assert not standin.violations, "OpenAPI contract violations:\n" + "\n".join(standin.violations)


@pytest.fixture
def lakekeeper(moto_server: MotoServer) -> Iterator[LakekeeperStandin]:
    """A Lakekeeper stand-in on a free port, its STS/S3 on the session's moto server."""
    standin = start_lakekeeper(S3Account(moto_server.url, moto_server.region))
    yield standin
    _verify(standin)


@pytest.fixture
def make_lakekeeper(moto_server: MotoServer) -> Iterator[Callable[..., LakekeeperStandin]]:
    """Factory for more stand-ins: ``make_lakekeeper(s3=moto_strict, page_size=2, ...)``."""
    started: list[LakekeeperStandin] = []

    def make(s3: Optional[S3Account] = None, **kwargs) -> LakekeeperStandin:
        standin = start_lakekeeper(s3 or S3Account(moto_server.url, moto_server.region), **kwargs)
        started.append(standin)
        return standin

    yield make
    for standin in started:
        _verify(standin)


@pytest.fixture
def oauth() -> Iterator[OAuthStandin]:
    """An OAuth2 client-credentials token endpoint (300 s tokens; set ``.ttl`` for shorter)."""
    standin = OAuthStandin().start()
    yield standin
    standin.stop()


@pytest.fixture(scope="session")
def moto_strict(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Account]:
    """moto with auth enforced: unknown keys fail, IAM policies (role per table) are evaluated.

    The first calls bootstrap Lakekeeper's own IAM user; afterwards every call is checked.
    """
    with run_moto(tmp_path_factory.mktemp("moto-strict"),
                  strict_bootstrap_calls=_STRICT_BOOTSTRAP_CALLS) as moto:
        iam = boto3.client("iam", endpoint_url=moto.url, region_name="us-east-1",
                           aws_access_key_id="bootstrap", aws_secret_access_key="bootstrap")
        iam.create_user(UserName="lakekeeper")
        iam.put_user_policy(UserName="lakekeeper", PolicyName="all", PolicyDocument=json.dumps(
            {"Version": "2012-10-17",
             "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}))
        key = iam.create_access_key(UserName="lakekeeper")["AccessKey"]
        yield S3Account(moto.url, "us-east-1", key["AccessKeyId"], key["SecretAccessKey"])
