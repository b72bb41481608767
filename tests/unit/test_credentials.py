"""Vended Lakekeeper config → Hadoop S3A settings, and its Flink / Spark / boto3 / printed views."""

from __future__ import annotations

import logging
from datetime import datetime, timezone

import pytest

from lakeflow.credentials import (SIMPLE_PROVIDER, TEMPORARY_PROVIDER, expiry_of, parse_vended,
                                  show, to_s3a)

LOCATION = "s3://bucket/warehouse/0196a3b8"
SECRET, TOKEN, ACCESS = "sEcReT/value+1", "SeSsIoN-token-value", "ASIAEXAMPLEKEY"
EXPIRES_MS = "1795310944201"
EXPIRES = datetime(2026, 11, 22, 1, 29, 4, 201000, tzinfo=timezone.utc)


def vended(config=None, cred=None, creds=None):
    """A load response's parts: ``config`` and one credential entry for the table prefix."""
    entries = creds if creds is not None else [{"prefix": LOCATION, "config": cred if cred is not None else {
        "s3.access-key-id": ACCESS, "s3.secret-access-key": SECRET, "s3.session-token": TOKEN,
        "expiration-time": EXPIRES_MS, "s3.session-token-expires-at-ms": EXPIRES_MS}}]
    return parse_vended(LOCATION, config if config is not None else {
        "s3.endpoint": "http://minio:9000/", "s3.region": "eu-central-1",
        "s3.path-style-access": "true"}, entries)


def test_session_token_selects_the_temporary_provider_and_markers_are_kept():
    h = to_s3a(vended()).hadoop
    assert h["fs.s3a.access.key"] == ACCESS and h["fs.s3a.secret.key"] == SECRET
    assert h["fs.s3a.session.token"] == TOKEN
    assert h["fs.s3a.aws.credentials.provider"] == TEMPORARY_PROVIDER
    assert h["fs.s3a.directory.marker.retention"] == "keep"


def test_keys_without_session_token_use_the_simple_provider():
    h = to_s3a(vended(cred={"s3.access-key-id": ACCESS, "s3.secret-access-key": SECRET})).hadoop
    assert h["fs.s3a.aws.credentials.provider"] == SIMPLE_PROVIDER
    assert "fs.s3a.session.token" not in h


def test_endpoint_loses_its_trailing_slash_and_http_disables_ssl():
    h = to_s3a(vended()).hadoop
    assert h["fs.s3a.endpoint"] == "http://minio:9000"
    assert h["fs.s3a.connection.ssl.enabled"] == "false"
    assert h["fs.s3a.path.style.access"] == "true"
    assert h["fs.s3a.endpoint.region"] == "eu-central-1"


def test_endpoint_override_replaces_the_vended_one():
    h = to_s3a(vended(), endpoint_override="https://s3.example.com/").hadoop
    assert h["fs.s3a.endpoint"] == "https://s3.example.com"
    assert "fs.s3a.connection.ssl.enabled" not in h


def test_region_falls_back_to_client_region_and_credential_entry_wins_over_config():
    h = to_s3a(parse_vended(LOCATION, {"client.region": "us-west-2", "s3.endpoint": "http://a/"},
                            [{"prefix": LOCATION, "config": {"s3.endpoint": "http://b/"}}])).hadoop
    assert h["fs.s3a.endpoint.region"] == "us-west-2"
    assert h["fs.s3a.endpoint"] == "http://b"


def test_the_credential_whose_prefix_matches_the_location_best_is_used():
    v = parse_vended(LOCATION, {}, [
        {"prefix": "s3://bucket/", "config": {"s3.access-key-id": "wide"}},
        {"prefix": LOCATION, "config": {"s3.access-key-id": "narrow"}},
        {"prefix": "s3://other/x", "config": {"s3.access-key-id": "elsewhere"}}])
    assert v.merged()["s3.access-key-id"] == "narrow"


def test_sse_kms():
    h = to_s3a(vended(config={"s3.sse.type": "kms", "s3.sse.key": "arn:aws:kms:eu:1:key/k"})).hadoop
    assert h["fs.s3a.encryption.algorithm"] == "SSE-KMS"
    assert h["fs.s3a.encryption.key"] == "arn:aws:kms:eu:1:key/k"
    assert "arn:aws:kms" not in repr(to_s3a(vended(config={"s3.sse.type": "kms", "s3.sse.key": "arn:aws:kms:x"})))


def test_an_entry_without_keys_is_valid_and_gives_no_credentials():
    v = vended(cred={})
    s3a = to_s3a(v)
    assert not v.has_keys and v.expires_at is None and s3a.expires_at is None
    assert not any(k in s3a.hadoop for k in ("fs.s3a.access.key", "fs.s3a.aws.credentials.provider"))
    assert s3a.hadoop["fs.s3a.directory.marker.retention"] == "keep"
    assert to_s3a(parse_vended(LOCATION, None, None)).boto3() == {}


@pytest.mark.parametrize("key", ["expiration-time", "s3.session-token-expires-at-ms"])
def test_expiry_from_either_key(key):
    assert vended(cred={key: EXPIRES_MS}).expires_at == EXPIRES
    assert to_s3a(vended(cred={key: EXPIRES_MS})).expires_at == EXPIRES


def test_expiry_accepts_iso_and_ignores_garbage():
    assert expiry_of({"expiration-time": "2026-11-22T01:29:04.201Z"}) == EXPIRES
    assert expiry_of({"expiration-time": "soon"}) is None


def test_engine_views():
    s3a = to_s3a(vended())
    assert s3a.flink() == dict(s3a.hadoop)
    assert s3a.spark()["spark.hadoop.fs.s3a.session.token"] == TOKEN
    assert all(k.startswith("spark.hadoop.fs.s3a.") for k in s3a.spark())
    kwargs = s3a.boto3()
    assert kwargs["aws_access_key_id"] == ACCESS and kwargs["aws_session_token"] == TOKEN
    assert kwargs["endpoint_url"] == "http://minio:9000" and kwargs["region_name"] == "eu-central-1"
    assert kwargs["config"].s3 == {"addressing_style": "path"}
    assert s3a.view("boto3")["addressing_style"] == "path"
    with pytest.raises(ValueError, match="expected flink, spark, s3a or boto3"):
        s3a.view("hive")


def test_show_hides_secrets_unless_asked():
    for fmt in ("flink", "spark", "s3a", "boto3"):
        lines = show(to_s3a(vended()).view(fmt))
        text = "\n".join(lines)
        assert SECRET not in text and TOKEN not in text and ACCESS not in text, fmt
        assert any(line.endswith("=***") for line in lines)
    shown = "\n".join(show(to_s3a(vended()).view("flink"), show_secrets=True))
    assert f"fs.s3a.secret.key={SECRET}" in shown and f"fs.s3a.session.token={TOKEN}" in shown


def test_reprs_and_logs_never_show_secrets(caplog):
    v = vended()
    s3a = to_s3a(v)
    with caplog.at_level(logging.DEBUG):
        logging.getLogger("lakeflow.test").info("vended %r %s %r %s", v, v, s3a, s3a)
    for text in (repr(v), str(v), repr(v.credentials[0]), repr(s3a), str(s3a.redacted()), caplog.text):
        assert SECRET not in text and TOKEN not in text and ACCESS not in text
    assert "***" in repr(s3a)
