"""Tokens: static or OAuth2 client credentials (authlib) against a real token endpoint stand-in.

Unit tests: they start no process. The real-process tests: tests/integration/test_auth.py."""

from __future__ import annotations

import threading

import pytest

from lakeflow.auth import AuthError, OAuthClientCredentials
from lakeflow.http import HttpOptions
from lakeflow.secret import Secret

FAST = HttpOptions(timeout=5, max_retries=2, backoff=0.01, jitter=0)


def provider(oauth, **kwargs) -> OAuthClientCredentials:
    return OAuthClientCredentials(oauth.token_url, oauth.client_id, Secret(oauth.client_secret),
                                  "lakekeeper", options=FAST, **kwargs)


def test_token_is_fetched_lazily_once_with_the_scope(oauth):
    tokens = provider(oauth)
    assert oauth.token_requests == 0
    first = tokens.token()
    assert all(tokens.token() == first for _ in range(50))
    assert oauth.token_requests == 1 and oauth.scopes == ["lakekeeper"]
    assert oauth.auth_methods == ["client_secret_post"]  # id and secret in the form, as Keycloak takes them


def test_renewal_leeway_is_proportional_to_a_short_lifetime(oauth):
    oauth.ttl = 2.0
    now = [100.0]
    tokens = provider(oauth, clock=lambda: now[0])
    first = tokens.token()
    for step in range(15):  # 1.5 s of calls: no refetch storm on a 2 s token
        now[0] = 100.0 + step * 0.1
        assert tokens.token() == first
    assert oauth.token_requests == 1
    now[0] = 101.65  # past 80 % of the lifetime: renewed before it expires
    assert tokens.token() != first
    assert oauth.token_requests == 2


def test_single_flight_under_eight_threads(oauth):
    oauth.delay = 0.3
    tokens = provider(oauth)
    barrier = threading.Barrier(8)
    got: list[Secret] = []

    def work() -> None:
        barrier.wait()
        got.append(tokens.token())

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert oauth.token_requests == 1
    assert len(got) == 8 and len(set(got)) == 1


def test_unreachable_token_endpoint(oauth):
    oauth.stop()
    with pytest.raises(AuthError, match="token endpoint .* failed"):
        provider(oauth).token()
