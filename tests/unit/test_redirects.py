"""No credential follows a redirect to another origin: the 401 retry, lakeflow's sessions and pools, the
OAuth token request and the Flink REST client, against real servers on 127.0.0.1 (two ports are
two origins)."""

from __future__ import annotations

from typing import Iterator

import pytest
import requests

from lakeflow.auth import AuthError, BearerAuth, OAuthClientCredentials, StaticToken
from lakeflow.http import HttpOptions, Pool, RedirectRefused, new_session, origin
from lakeflow.lineage.flink_rest import Auth, Connection, FlinkRestClient, FlinkRestError
from lakeflow.secret import Secret
from tests.standins.flink_rest import Answer
from tests.standins.oauth import OAuthStandin
from tests.standins.http_stub import FixedServer

FAST = HttpOptions(timeout=5, max_retries=0)
TOKEN = "t0k3n-not-for-others"


@pytest.fixture
def servers() -> Iterator:
    started: list[FixedServer] = []

    def start(status: int, headers: tuple[tuple[str, str], ...] = (), body: bytes = b"") -> FixedServer:
        server = FixedServer(status, headers, body).start()
        started.append(server)
        return server

    yield start
    for s in started:
        s.stop()


def redirect_to(servers, target: str, status: int = 302) -> FixedServer:
    return servers(status, (("Location", target),))


def test_the_401_retry_never_sends_a_token_to_where_a_redirect_led(servers):
    other = servers(401, body=b'{"error": "who are you"}')
    here = redirect_to(servers, f"{other.url}/elsewhere")
    session = requests.Session()  # follows redirects as requests does (strips Authorization)
    session.auth = BearerAuth(StaticToken(Secret(TOKEN)))
    assert session.get(f"{here.url}/api").status_code == 401
    assert here.received[0].headers["Authorization"] == f"Bearer {TOKEN}"
    assert len(other.received) == 1  # no retry: the 401 came from another origin
    assert "Authorization" not in other.received[0].headers


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_lakeflow_sessions_refuse_a_redirect_to_another_origin(servers, status):
    other = servers(200, body=b"{}")
    here = redirect_to(servers, f"{other.url}/elsewhere", status)
    session = new_session(FAST, BearerAuth(StaticToken(Secret(TOKEN))))
    with pytest.raises(requests.RequestException) as err:
        session.post(f"{here.url}/api", data=b"payload")
    assert str(err.value) == (f"redirect from {here.url} to {other.url} refused: credentials go to the "
                              "configured origin only (configure the URL it redirects to instead)")
    assert other.received == []
    assert TOKEN not in str(err.value)


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_lakeflow_pools_refuse_a_redirect_to_another_origin(servers, status):
    other = servers(200, body=b"{}")
    here = redirect_to(servers, f"{other.url}/elsewhere", status)
    pool = Pool(here.url, FAST, {"Authorization": f"Bearer {TOKEN}"})
    with pytest.raises(RedirectRefused) as err:
        pool.request("POST", f"{here.url}/api", b"payload")
    assert str(err.value) == (f"redirect from {here.url} to {other.url} refused: credentials go to the "
                              "configured origin only (configure the URL it redirects to instead)")
    assert [r.body for r in here.received] == [b"payload"]
    assert other.received == []


def test_a_redirect_within_the_origin_keeps_its_credentials(flink_rest_stub):
    flink_rest_stub.route("/moved", Answer(307, b"", headers=(("Location", "/v1/config"),)))
    flink_rest_stub.route("/config", Answer(200, {"flink-version": "2.3.0"}))
    conn = Connection(flink_rest_stub.url, auth=Auth(token=Secret(TOKEN)), max_retries=0)
    assert FlinkRestClient(conn).get("/moved") == {"flink-version": "2.3.0"}
    assert [(p, h["Authorization"]) for p, h in flink_rest_stub.requests] == [
        ("/moved", f"Bearer {TOKEN}"), ("/config", f"Bearer {TOKEN}")]


@pytest.mark.parametrize("auth", [Auth(token=Secret(TOKEN)), Auth(username="ann", password=Secret(TOKEN))])
def test_flink_rest_credentials_never_follow_a_redirect_elsewhere(servers, flink_rest_stub, auth):
    other = servers(200, body=b'{"flink-version": "2.3.0"}')
    flink_rest_stub.route("/config", Answer(302, b"", headers=(("Location", f"{other.url}/v1/config"),)))
    with pytest.raises(FlinkRestError, match=f"redirect from {flink_rest_stub.url} to {other.url} refused"):
        FlinkRestClient(Connection(flink_rest_stub.url, auth=auth, max_retries=0)).cluster_config()
    assert other.received == []


@pytest.mark.parametrize("status", [307, 308])
def test_the_token_request_does_not_take_the_client_secret_elsewhere(servers, status):
    other = OAuthStandin().start()  # would hand out a token for the same client
    try:
        here = redirect_to(servers, other.token_url, status)
        tokens = OAuthClientCredentials(f"{here.url}/token", other.client_id, Secret(other.client_secret),
                                        options=FAST)
        with pytest.raises(AuthError) as err:
            tokens.token()
        assert str(err.value).startswith(f"token endpoint {here.url}/token failed: redirect from {here.url} "
                                          f"to {other.url} refused")
        assert other.client_secret not in str(err.value)
        assert other.token_requests == 0
        assert other.client_secret.encode() in here.received[0].body  # sent to the configured origin only
    finally:
        other.stop()


@pytest.mark.parametrize("a, b, same", [
    ("http://h:8181/a", "http://h:8181/b?x=1", True),
    ("http://h/a", "http://H:80/b", True),
    ("https://h/a", "https://h:443", True),
    ("http://h/a", "https://h/a", False),  # requests keeps Authorization here; lakeflow does not
    ("http://127.0.0.1:8081", "http://localhost:8081", False),
    ("http://h:8081", "http://h:8082", False),
])
def test_an_origin_is_scheme_host_and_port(a, b, same):
    assert (origin(a) == origin(b)) is same
