"""The stand-ins with authorization on answer as the real Lakekeeper 0.13.3 with OpenFGA did: every
recorded exchange (``tests/contracts/lakekeeper-authz-0.13.3.jsonl``, see
tests/standins/lakekeeper_authz_recorded.py) is sent again, in order, each with a token of its
principal's OAuth client, to Lakekeeper with OpenFGA at one URL (tests/support/lakehouse.py
:func:`authorized_lakekeeper`: the management and Lakekeeper stand-ins sharing one authorizer,
Apache's Iceberg REST server behind ``/catalog``, moto with IAM enforced), and each answer is
compared with the real one: status, error type and message, and the shape of the body. The ids
the real server gave are mapped to the ones the stand-ins gave at the same place of the same answer
(and in the messages).

The Iceberg table metadata in a load, create or commit answer is Apache's server's, not the
stand-in's: it is compared as an object (the rest of such an answer, what authorization decides —
credentials or none, the config — is compared key by key). Exchanges 1-2 ran against a server
instance that was thrown away (``lf-other`` bootstrapped it; README: "Bootstrap"): they are
replayed against a fresh management stand-in with an authorizer of its own.

What cannot be modelled is listed in :data:`NOT_REPLAYED` with the reason; the test fails when a
listed exchange stops matching one, so the list stays true.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.standins.authz import Authorizer
from tests.standins.lakekeeper import S3Account
from tests.standins.lakekeeper_authz_recorded import Answer, Exchange, answer_of, load
from tests.standins.management import ManagementStandin
from tests.standins.oauth import OAuthStandin
from tests.support.lakehouse import PRINCIPALS, authorized_lakekeeper, catalog_key

pytestmark = pytest.mark.slow

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_ICEBERG_TABLE = re.compile(r"^/catalog/v1/[^/]+/namespaces/[^/]+/tables")

# "<n> <step>" of an exchange → why the stand-ins are not asked. Every other exchange is replayed
# and compared.
NOT_REPLAYED: dict[str, str] = {}


@pytest.fixture
def oauth() -> Iterator[OAuthStandin]:
    """The recording's OpenID provider: one client per principal, tokens for the whole replay."""
    standin = OAuthStandin(client_id=PRINCIPALS[0], ttl=3600).start()
    for principal in PRINCIPALS[1:]:
        standin.add_client(principal)
    yield standin
    standin.stop()


class Replay:
    """Sends recorded requests to one server as their principals; maps the real server's ids to
    the stand-ins' (learnt from the answers, place by place)."""

    def __init__(self, url: str, oauth: OAuthStandin, mapped: dict[str, str]) -> None:
        self.url, self.mapped = url, mapped
        self.tokens = {principal: oauth.issue(principal) for principal in PRINCIPALS}
        self.session = requests.Session()

    def send(self, ex: Exchange) -> Answer:
        """The stand-ins' answer to ``ex``'s request, its compared parts."""
        path = _UUID.sub(lambda m: self.mapped.get(m.group(0), m.group(0)), ex.path)
        headers = {"Accept-Encoding": "identity"}
        if ex.principal is not None:
            headers["Authorization"] = f"Bearer {self.tokens[ex.principal]}"
        if ex.delegation is not None:
            headers["X-Iceberg-Access-Delegation"] = ex.delegation
        data = None
        if ex.body is not None:
            data = _UUID.sub(lambda m: self.mapped.get(m.group(0), m.group(0)), json.dumps(ex.body)).encode()
            headers["Content-Type"] = "application/json"
        response = self.session.request(ex.method, self.url + path, data=data, headers=headers, timeout=60)
        try:
            body: Any = response.json()
        except ValueError:
            body = response.text or None
        ours = answer_of(response.status_code, body)
        for place, real in ex.answer.ids.items():
            if place in ours.ids:
                self.mapped.setdefault(real, ours.ids[place])
        return ours


def _compared_shape(ex: Exchange, shape: Any) -> Any:
    """A body's shape as compared: Iceberg table metadata (Apache's server's) as an object."""
    if _ICEBERG_TABLE.match(ex.path) and isinstance(shape, dict) and isinstance(shape.get("metadata"), dict):
        return {**shape, "metadata": "dict"}
    return shape


def _recorded_warehouse(exchanges: list[Exchange]) -> tuple[str, str]:
    """The bucket and key prefix of the warehouse the recording's admin created."""
    created = next(ex for ex in exchanges if (ex.method, ex.path, ex.instance) == ("POST", "/management/v1/warehouse", 2))
    profile = created.body["storage-profile"]
    return profile["bucket"], profile["key-prefix"]


def _differences(ex: Exchange, ours: Answer, mapped: dict[str, str]) -> list[str]:
    real, found = ex.answer, []
    expected_message = _UUID.sub(lambda m: mapped.get(m.group(0), m.group(0)), real.error_message or "") or None
    for field, expected in (("status", real.status), ("error_type", real.error_type),
                            ("error_message", expected_message)):
        if expected != getattr(ours, field):
            found.append(f"{ex.label}: {field}: real {expected!r}, stand-in {getattr(ours, field)!r}")
    if _compared_shape(ex, real.shape) != _compared_shape(ex, ours.shape):
        found.append(f"{ex.label}: body\n  real     {json.dumps(_compared_shape(ex, real.shape))}\n"
                     f"  stand-in {json.dumps(_compared_shape(ex, ours.shape))}")
    return found


def test_the_stand_ins_with_authorization_answer_every_recorded_request_as_lakekeeper_did(
        moto_iam: S3Account, oauth: OAuthStandin, tmp_path: Path) -> None:
    exchanges = load()
    used, differences, compared, mapped = set(), [], 0, {}

    def replay(url: str, instance: int) -> None:
        nonlocal compared
        sender = Replay(url, oauth, mapped)
        for ex in exchanges:
            if ex.instance != instance:
                continue
            if f"{ex.n} {ex.step}" in NOT_REPLAYED:
                used.add(f"{ex.n} {ex.step}")
                continue
            differences.extend(_differences(ex, sender.send(ex), mapped))
            compared += 1

    discarded = ManagementStandin(authz=Authorizer(oauth.subject_of))
    server = discarded.serve()
    try:
        replay(discarded.url, 1)
    finally:
        server.shutdown()
        server.server_close()
    bucket, key_prefix = _recorded_warehouse(exchanges)
    with authorized_lakekeeper(moto_iam, oauth, f"s3://{bucket}/{key_prefix}", tmp_path / "iceberg-rest",
                               catalog_key(moto_iam, bucket, key_prefix)) as lakekeeper:
        replay(lakekeeper.url, 2)

    assert not differences, f"{len(differences)} of {compared} answers differ:\n" + "\n".join(differences)
    assert used == set(NOT_REPLAYED), f"NOT_REPLAYED entries that match no exchange: {set(NOT_REPLAYED) - used}"
    assert compared == len(exchanges) - len(NOT_REPLAYED) and compared >= 300, compared
