"""Tokens: static or OAuth2 client credentials (authlib) against a real token endpoint stand-in.

The unit tests (no process): tests/unit/test_auth.py.
"""

from __future__ import annotations

import logging
import time
import uuid

import pytest

from lakeflow.auth import AuthError, BearerAuth, OAuthClientCredentials, StaticToken, token_provider
from lakeflow.catalog.base import CatalogError
from lakeflow.catalog.lakekeeper import LakekeeperCatalog
from lakeflow.secret import Secret
from tests.support.fixtures_lakekeeper import settings_for
from tests.unit.test_auth import FAST, provider  # noqa: F401 (fixtures, constants)


def oauth_catalog(lakekeeper, oauth) -> LakekeeperCatalog:
    lakekeeper.accept(oauth.is_valid)
    return LakekeeperCatalog(lakekeeper.url, lakekeeper.warehouse_id, auth=provider(oauth), options=FAST)


def test_short_lived_tokens_keep_working_in_real_time(lakekeeper, oauth):
    oauth.ttl = 1.5  # renewed after 1.2 s, 0.3 s before the server would refuse it
    catalog = oauth_catalog(lakekeeper, oauth)
    deadline = time.monotonic() + 2.5
    calls = 0
    while time.monotonic() < deadline:
        catalog.list_tables(("iot",))
        calls += 1
    assert calls >= 5
    assert 2 <= oauth.token_requests <= 3  # renewed in time, not fetched per call
    assert {r.status for r in lakekeeper.calls("GET", "/generic-tables")} == {200}  # never a 401


def test_401_drops_the_token_and_retries_once(lakekeeper, oauth):
    catalog = oauth_catalog(lakekeeper, oauth)
    catalog.register(("iot",), "readings")
    assert oauth.token_requests == 1
    oauth.revoke_all()  # e.g. the provider rotated its keys
    assert catalog.load(("iot",), "readings").location
    assert oauth.token_requests == 2
    loads = [r.status for r in lakekeeper.calls("GET", "/generic-tables/readings")]
    assert loads[-2:] == [401, 200]
    checks = iter([True, False])  # a POST is re-sent with its body and its Idempotency-Key: register's
    lakekeeper.accept(lambda token: next(checks, True))  # load (404) passes, its create is refused once
    assert catalog.register(("iot",), "second").created
    lakekeeper.accept(None)
    creates = lakekeeper.calls("POST", "/generic-tables")[-2:]
    assert [r.status for r in creates] == [401, 200]
    assert creates[0].headers["idempotency-key"] == creates[1].headers["idempotency-key"]
    assert creates[1].body == {"name": "second", "format": "dataset"}


def test_a_token_rejected_twice_is_an_error_not_a_loop(lakekeeper, oauth):
    catalog = oauth_catalog(lakekeeper, oauth)
    lakekeeper.accept(lambda token: False)  # e.g. the wrong audience
    with pytest.raises(CatalogError) as err:
        catalog.list_tables(("iot",))
    assert (err.value.code, err.value.type) == (401, "AuthenticationFailed")
    assert str(uuid.UUID(err.value.error_id)) == err.value.error_id  # the server's Error ID, a UUID
    assert len(lakekeeper.calls("GET", "/generic-tables")) == 2
    assert oauth.token_requests == 2


def test_an_expired_static_token_fails_at_once(lakekeeper):
    catalog = LakekeeperCatalog(lakekeeper.url, lakekeeper.warehouse_id,
                                auth=StaticToken(Secret(lakekeeper.token)), options=FAST)
    lakekeeper.revoke(lakekeeper.token)
    with pytest.raises(CatalogError) as err:
        catalog.list_tables(("iot",))
    assert (err.value.code, err.value.type) == (401, "AuthenticationFailed")
    assert len(lakekeeper.calls("GET")) == 1  # nothing new to retry with


def test_no_token_is_missing_authorization(lakekeeper):
    catalog = LakekeeperCatalog(lakekeeper.url, lakekeeper.warehouse_id, options=FAST)
    with pytest.raises(CatalogError) as err:
        catalog.list_tables(("iot",))
    assert (err.value.code, err.value.type) == (401, "MissingAuthorizationHeader")


def test_wrong_client_secret_names_the_endpoint_but_not_the_secret(lakekeeper, oauth):
    bad = OAuthClientCredentials(oauth.token_url, oauth.client_id, Secret("wrong-secret-value"),
                                 options=FAST)
    with pytest.raises(AuthError) as err:
        bad.token()
    assert oauth.token_url in str(err.value) and "invalid_client" in str(err.value)
    assert "wrong-secret-value" not in str(err.value)
    lakekeeper.accept(oauth.is_valid)
    catalog = LakekeeperCatalog(lakekeeper.url, lakekeeper.warehouse_id, auth=bad, options=FAST)
    with pytest.raises(CatalogError) as err:
        catalog.load(("iot",), "t")
    assert err.value.type == "AuthenticationFailed" and "wrong-secret-value" not in str(err.value)


def test_provider_from_settings(lakekeeper, oauth):
    assert token_provider(settings_for(lakekeeper, TOKEN=None), FAST) is None
    assert isinstance(token_provider(settings_for(lakekeeper), FAST), StaticToken)
    oauth_settings = settings_for(lakekeeper, TOKEN=None, OAUTH_TOKEN_URL=oauth.token_url,
                                  OAUTH_CLIENT_ID=oauth.client_id,
                                  OAUTH_CLIENT_SECRET=oauth.client_secret)
    lakekeeper.accept(oauth.is_valid)
    catalog = LakekeeperCatalog.from_settings(oauth_settings)
    assert isinstance(catalog.auth, OAuthClientCredentials)
    assert catalog.list_tables(("iot",)) == []


def test_tokens_and_secrets_stay_out_of_reprs_and_logs(lakekeeper, oauth, caplog):
    tokens = provider(oauth)
    catalog = oauth_catalog(lakekeeper, oauth)
    catalog_tokens = catalog.auth
    with caplog.at_level(logging.DEBUG):
        catalog.register(("iot",), "logged")
        tokens.token()
    issued = [tokens.token().reveal(), catalog_tokens.token().reveal()]  # type: ignore[union-attr]
    texts = [caplog.text, repr(tokens), repr(catalog), repr(BearerAuth(tokens)),
             repr(StaticToken(Secret(lakekeeper.token))), repr(lakekeeper.requests)]
    assert "POST" in caplog.text or "/token" in caplog.text  # the DEBUG logs were captured
    for text in texts:
        assert oauth.client_secret not in text
        assert lakekeeper.token not in text
        assert not any(token in text for token in issued)
