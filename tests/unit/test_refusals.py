"""Lakekeeper's authorization refusals become one line naming the principal, the object and the
privilege to grant; what a principal cannot see is "not visible to" it as well as "does not exist".
The messages are the real server's (shared/lakekeeper-api/recorded-authz-0.13.3)."""

from __future__ import annotations

import json

import pytest
from pyiceberg.exceptions import ForbiddenError, NoSuchNamespaceError

from lakeflow.auth import principal_name
from lakeflow.catalog.errors import Forbidden, TableNotFound, catalog_error, error_from, from_iceberg
from lakeflow.settings import load_settings

WH = "445bf0f4-edc1-11f1-962e-932a81d1fd44"


def _answer(code: int, type_: str, message: str) -> bytes:
    return json.dumps({"error": {"message": message, "type": type_, "code": code,
                                 "stack": ["Error ID: 01a2332f-5a6d-7ac1-9815-37a03f2704d7"]}}).encode()


@pytest.mark.parametrize(
    ("code", "type_", "message", "line"),
    [
        (403, "TableActionForbidden",
         f"Table action `read_data` forbidden on table 'iot.sensor-readings-compacted' in warehouse `{WH}`",
         "lf-ingest may not read table iot.sensor-readings-compacted: grant it select on it"),
        (403, "WarehouseActionForbidden", f"Warehouse action `can_create_namespace` forbidden on warehouse `{WH}`",
         f"lf-ingest may not create namespaces in warehouse {WH}: grant it create on it"),
        (403, "NamespaceActionForbidden",
         f"Namespace action `can_create_generic_table` forbidden on namespace with name 'iot' in warehouse `{WH}`",
         "lf-ingest may not create tables in namespace iot: grant it create on it"),
        (403, "GenericTableActionForbidden",
         f"Generic table action `can_drop` forbidden on generic table 'iot.other-raw' in warehouse `{WH}`",
         "lf-ingest may not drop generic table iot.other-raw: grant it modify on it"),
        (403, "TableActionForbidden",
         f"Table action `can_commit` forbidden on table 'iot.other-iceberg' in warehouse `{WH}`",
         "lf-ingest may not commit to table iot.other-iceberg: grant it modify on it"),
        (401, "Unauthorized",
         f"Unauthorized for action `can_grant_modify` on `lakekeeper_generic_table:{WH}/01a2332e`",
         f"lf-ingest may not grant modify on lakekeeper_generic_table:{WH}/01a2332e: only its owner or a "
         "holder of manage_grants may"),
    ],
)
def test_a_refusal_names_the_principal_the_object_and_the_grant(code, type_, message, line) -> None:
    error = error_from(code, _answer(code, type_, message), what="compact", principal="lf-ingest")
    assert isinstance(error, Forbidden)
    assert f"compact: {line}" in str(error) and "\n" not in str(error)
    assert error.error_id == "01a2332f-5a6d-7ac1-9815-37a03f2704d7"


@pytest.mark.parametrize(
    ("type_", "message", "missing"),
    [
        ("NoSuchNamespaceException", f"Namespace with name 'iot' does not exist in warehouse '{WH}'", "the namespace"),
        ("NoSuchGenericTableException", "Error getting tabular from catalog", "the table"),
        ("NoSuchWarehouseException", f"A warehouse with id '{WH}' does not exist", "the warehouse"),
    ],
)
def test_what_a_principal_cannot_see_is_not_visible_to_it(type_, message, missing) -> None:
    error = error_from(404, _answer(404, type_, message), what="register iot.t", principal="lf-other")
    assert f"register iot.t: {missing} does not exist or is not visible to lf-other" in str(error)
    assert isinstance(error, TableNotFound) == (type_ == "NoSuchGenericTableException")


def test_pyicebergs_refusals_read_the_same() -> None:
    forbidden = ForbiddenError(
        f"TableActionForbidden: Table action `read_data` forbidden on table 'iot.c' in warehouse `{WH}`")
    error = from_iceberg(forbidden, what="load Iceberg table iot.c", principal="lf-compact")
    assert isinstance(error, Forbidden)
    assert "load Iceberg table iot.c: lf-compact may not read table iot.c: grant it select on it" in str(error)
    hidden = from_iceberg(NoSuchNamespaceError("NoSuchNamespaceException: Namespace with name 'iot' does not exist"),
                          what="load Iceberg table iot.c", principal="lf-other")
    assert hidden is not None and "the namespace does not exist or is not visible to lf-other" in str(hidden)


def test_a_refusal_without_a_known_principal_and_another_403() -> None:
    unnamed = catalog_error("x", f"Table action `read_data` forbidden on table 'iot.c' in warehouse `{WH}`", code=403)
    assert "this principal may not read table iot.c" in str(unnamed)
    other = catalog_error("x", "some proxy said no", code=403)
    assert not isinstance(other, Forbidden) and str(other) == "403: x: some proxy said no"


def _jwt(claims: dict) -> str:
    import base64

    def part(obj: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")

    return f"{part({'alg': 'RS256'})}.{part(claims)}.c2lnbmF0dXJl"


def test_the_principal_is_the_oauth_client_or_the_tokens_subject(tmp_path) -> None:
    base = {"LAKEFLOW_HOME": str(tmp_path), "CATALOG": "lakekeeper", "WAREHOUSE_ID": "lakeflow"}
    oauth = load_settings({**base, "OAUTH_TOKEN_URL": "http://idp/token", "OAUTH_CLIENT_ID": "lf-compact",
                           "OAUTH_CLIENT_SECRET": "s3cret"}, env_file=tmp_path / "none")
    assert principal_name(oauth) == "lf-compact"
    token = load_settings({**base, "TOKEN": _jwt({"sub": "lf-ingest"})}, env_file=tmp_path / "none")
    assert principal_name(token) == "lf-ingest"
    opaque = load_settings({**base, "TOKEN": "not-a-jwt"}, env_file=tmp_path / "none")
    assert principal_name(opaque) == ""
