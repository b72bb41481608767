"""Credentials that expire while a job runs (issue #11, item 4).

moto never refuses an expired session token, so S3 and STS are reached through
``tests/standins/s3_expiry_proxy.py``: moto with auth enforced behind a proxy that learns each session
token's expiry from the STS answers it relays and then answers ``ExpiredToken`` as AWS does.
Session credentials here last seconds (moto accepts any DurationSeconds; botocore's own
900 s minimum is switched off in these clients).
"""

from __future__ import annotations

import hashlib
import hmac
import io
import json
import os
import socket
import time
from datetime import datetime
from typing import Any, Mapping
from urllib.parse import urlsplit

import boto3
import pytest
import requests
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

from lakeflow.aws_profile import catalog_settings, write_profile
from lakeflow.catalog.lakekeeper import LakekeeperCatalog
from tests.support.fixtures_lakekeeper import settings_for
from tests.standins.s3_expiry_proxy import ExpiringS3, header_fields, read_head

SHORT_S = 3  # lifetime of the short session credentials
UNLIMITED = Config(parameter_validation=False)
ALLOW_ALL = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
TRUST = {"Version": "2012-10-17",
         "Statement": [{"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "sts:AssumeRole"}]}


def _bucket(s3e: ExpiringS3) -> str:
    name = f"expiry-{os.urandom(6).hex()}"
    s3e.client("s3").create_bucket(Bucket=name)
    return name


def _assume(s3e: ExpiringS3, seconds: int, endpoint: str | None = None) -> dict[str, Any]:
    """Session credentials of a role allowed everything, from STS at ``endpoint`` (default: the proxy)."""
    name = f"expiry-{os.urandom(6).hex()}"
    iam = s3e.client("iam")
    arn = iam.create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(TRUST))["Role"]["Arn"]
    iam.put_role_policy(RoleName=name, PolicyName="all", PolicyDocument=json.dumps(ALLOW_ALL))
    sts = s3e.client("sts", endpoint_url=endpoint) if endpoint else s3e.client("sts")
    return sts.assume_role(RoleArn=arn, RoleSessionName="expiry-test", DurationSeconds=seconds)["Credentials"]


def _as(creds: Mapping[str, Any], endpoint: str, service: str = "s3") -> Any:
    return boto3.client(service, endpoint_url=endpoint, region_name="us-east-1", config=UNLIMITED,
                        aws_access_key_id=creds["AccessKeyId"], aws_secret_access_key=creds["SecretAccessKey"],
                        aws_session_token=creds["SessionToken"])


def _sleep_past(expiration: datetime) -> None:
    time.sleep(max(0.0, expiration.timestamp() - time.time()) + 0.3)


def _refused(call: Any, code: str = "ExpiredToken") -> ClientError:
    with pytest.raises(ClientError) as caught:
        call()
    assert caught.value.response["Error"]["Code"] == code, caught.value.response
    return caught.value


def test_moto_alone_takes_an_expired_session_token_and_the_proxy_passes_tokens_it_never_saw(s3_expiring):
    bucket = _bucket(s3_expiring)  # the IAM user's static keys pass the proxy
    before = time.time()
    creds = _assume(s3_expiring, 1, endpoint=s3_expiring.moto_url)  # STS answered moto-direct
    assert before + 1 <= creds["Expiration"].timestamp() <= time.time() + 1, "moto honours DurationSeconds=1"
    _sleep_past(creds["Expiration"])
    _as(creds, s3_expiring.moto_url).put_object(Bucket=bucket, Key="late.json", Body=b"[]")  # moto ignores expiry
    _as(creds, s3_expiring.url).put_object(Bucket=bucket, Key="late.json", Body=b"[]")  # unknown token: moto decides
    assert s3_expiring.proxy.refused == 0 and not s3_expiring.proxy.expiries


def test_an_expired_session_token_is_refused_as_s3_refuses_it(s3_expiring):
    proxy, bucket = s3_expiring.proxy, _bucket(s3_expiring)
    before = time.time()
    creds = _assume(s3_expiring, SHORT_S)
    token = creds["SessionToken"]
    assert before + SHORT_S <= creds["Expiration"].timestamp() <= time.time() + SHORT_S
    assert proxy.expiries[token] == creds["Expiration"].timestamp()
    s3 = _as(creds, s3_expiring.url)
    s3.put_object(Bucket=bucket, Key="early.json", Body=b"[1]")
    assert s3.get_object(Bucket=bucket, Key="early.json")["Body"].read() == b"[1]"
    # (strict moto answers 500 to any presigned URL: it looks for an Authorization header)
    presigned = s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "early.json"})
    assert proxy.refused == 0

    _sleep_past(creds["Expiration"])
    error = _refused(lambda: s3.put_object(Bucket=bucket, Key="late.json", Body=b"[2]"))
    meta = error.response["ResponseMetadata"]
    assert meta["HTTPStatusCode"] == 400 and error.response["Error"]["Message"] == "The provided token has expired."
    assert error.response["Error"]["Token-0"] == token and len(meta["HTTPHeaders"]["x-amz-request-id"]) == 16
    assert meta["RequestId"] == meta["HTTPHeaders"]["x-amz-request-id"] and proxy.refused == 1
    _refused(lambda: s3.get_object(Bucket=bucket, Key="early.json"))
    _refused(lambda: s3.list_objects_v2(Bucket=bucket))
    assert proxy.refused == 3
    _refused(lambda: s3.head_object(Bucket=bucket, Key="early.json"), code="400")  # HEAD: status only, no body
    answer = requests.get(presigned, timeout=10)  # the token in the query string
    assert answer.status_code == 400 and b"<Code>ExpiredToken</Code>" in answer.content
    _refused(lambda: s3.upload_fileobj(io.BytesIO(b"[3]"), bucket, "late.json"))  # Expect: 100-continue
    interim, status, answer = _aws_chunked_put(s3_expiring.url, creds, bucket, "late.json", b"[4]")
    assert (interim, status) == (0, 400) and b"<Code>ExpiredToken</Code>" in answer  # refused before the body
    sts_error = _refused(lambda: _as(creds, s3_expiring.url, "sts").get_caller_identity())
    assert sts_error.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    refused = proxy.refused
    assert refused >= 8
    s3_expiring.client("s3").put_object(Bucket=bucket, Key="static.json", Body=b"[]")  # static keys: no expiry
    assert proxy.refused == refused
    assert not s3_expiring.client("s3").list_objects_v2(Bucket=bucket, Prefix="late")["KeyCount"]


# -- uploads as the AWS SDKs send them ---------------------------------------------------------------


def _exchange(url: str, method: str, target: str, headers: Mapping[str, str], body: bytes,
              chunk: int = 64 * 1024) -> tuple[int, int, bytes]:
    """One request by hand, as the AWS SDKs for Java send uploads: ``Expect: 100-continue`` and
    the body only after ``100 Continue`` (chunked when ``Transfer-Encoding: chunked``).
    Returns (interim answers seen, final status, final body)."""
    netloc = urlsplit(url).netloc
    host, port = netloc.split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock, sock.makefile("rb") as answers:
        fields = {"Host": netloc, **headers, "Expect": "100-continue"}
        sock.sendall((f"{method} {target} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in fields.items())
                      + "\r\n").encode())
        interim, sent = 0, False
        while True:
            head = read_head(answers)
            status = int(head[0].split()[1])
            if status != 100:
                break
            interim += 1
            if not sent:
                if fields.get("Transfer-Encoding") == "chunked":
                    framed = [b"%x\r\n%s\r\n" % (len(body[i:i + chunk]), body[i:i + chunk])
                              for i in range(0, len(body), chunk)]
                    sock.sendall(b"".join(framed) + b"0\r\n\r\n")
                else:
                    sock.sendall(body)
                sent = True
        return interim, status, answers.read(int(header_fields(head).get("content-length") or 0))


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def _signed(url: str, creds: Mapping[str, Any], headers: dict[str, str]) -> AWSRequest:
    """A PUT to ``url`` signed with SigV4 over ``headers`` (``x-amz-content-sha256`` as given)."""
    request = AWSRequest("PUT", url, headers=headers)
    credentials = Credentials(creds["AccessKeyId"], creds["SecretAccessKey"], creds["SessionToken"])
    SigV4Auth(credentials, "s3", "us-east-1").add_auth(request)
    return request


def _chunked_put(endpoint: str, creds: Mapping[str, Any], bucket: str, key: str,
                 data: bytes) -> tuple[int, int, bytes]:
    """A PUT of unknown length: ``Transfer-Encoding: chunked``, ``UNSIGNED-PAYLOAD``."""
    request = _signed(f"{endpoint}/{bucket}/{key}", creds,
                      {"x-amz-content-sha256": "UNSIGNED-PAYLOAD", "Transfer-Encoding": "chunked"})
    return _exchange(endpoint, "PUT", f"/{bucket}/{key}", dict(request.headers.items()), data)


def _aws_chunked_put(endpoint: str, creds: Mapping[str, Any], bucket: str, key: str, data: bytes,
                     chunk: int = 64 * 1024) -> tuple[int, int, bytes]:
    """A PUT with a SigV4 streaming-signed payload (``STREAMING-AWS4-HMAC-SHA256-PAYLOAD``,
    ``aws-chunked``): what the AWS SDKs for Java send for PutObject / UploadPart over http."""
    pieces = [data[i:i + chunk] for i in range(0, len(data), chunk)] + [b""]
    encoded_length = sum(len(f"{len(p):x};chunk-signature=") + 64 + 2 + len(p) + 2 for p in pieces)
    request = _signed(f"{endpoint}/{bucket}/{key}", creds, {
        "x-amz-content-sha256": "STREAMING-AWS4-HMAC-SHA256-PAYLOAD", "Content-Encoding": "aws-chunked",
        "x-amz-decoded-content-length": str(len(data)), "Content-Length": str(encoded_length)})
    amz_date = request.headers["X-Amz-Date"]
    scope = f"{amz_date[:8]}/us-east-1/s3/aws4_request"
    signing_key = _hmac(_hmac(_hmac(_hmac(f"AWS4{creds['SecretAccessKey']}".encode(), amz_date[:8]),
                                    "us-east-1"), "s3"), "aws4_request")
    previous = request.headers["Authorization"].rsplit("Signature=", 1)[1]
    body = b""
    for piece in pieces:
        to_sign = "\n".join(["AWS4-HMAC-SHA256-PAYLOAD", amz_date, scope, previous,
                             hashlib.sha256(b"").hexdigest(), hashlib.sha256(piece).hexdigest()])
        previous = hmac.new(signing_key, to_sign.encode(), hashlib.sha256).hexdigest()
        body += f"{len(piece):x};chunk-signature={previous}\r\n".encode() + piece + b"\r\n"
    assert len(body) == encoded_length
    return _exchange(endpoint, "PUT", f"/{bucket}/{key}", dict(request.headers.items()), body)


def test_uploads_pass_through_the_proxy_intact(s3_expiring):
    proxy, bucket = s3_expiring.proxy, _bucket(s3_expiring)
    creds = _assume(s3_expiring, 900)
    s3 = _as(creds, s3_expiring.url)
    data = os.urandom(10 * 1024 * 1024 + 12345)

    s3.upload_fileobj(io.BytesIO(data), bucket, "multipart.bin")  # 8 MiB parts: multipart
    parts = [f for f in proxy.forwarded if "partNumber=" in f.target]
    assert len(parts) == 2 and all(f.headers.get("expect") == "100-continue" for f in parts)
    assert s3.head_object(Bucket=bucket, Key="multipart.bin")["ETag"].endswith('-2"')

    interim, status, answer = _aws_chunked_put(s3_expiring.url, creds, bucket, "aws-chunked.bin", data[:300_000])
    assert (status, interim >= 1) == (200, True), answer
    interim, status, answer = _chunked_put(s3_expiring.url, creds, bucket, "chunked.bin", data[:200_000])
    assert (status, interim >= 1) == (200, True), answer
    chunked = [f for f in proxy.forwarded if f.target.startswith(f"/{bucket}/chunked.bin")]
    assert chunked[0].headers["transfer-encoding"] == "chunked"

    for key, expected in (("multipart.bin", data), ("aws-chunked.bin", data[:300_000]),
                          ("chunked.bin", data[:200_000])):
        got = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        assert hashlib.sha256(got).digest() == hashlib.sha256(expected).digest(), key
    assert proxy.refused == 0


# -- lakeflow's refreshing route against credentials that really expire -------------------------------


def test_refreshing_profile_keeps_writing_past_the_first_credentials_expiry(make_lakekeeper, s3_expiring,
                                                                            tmp_path, monkeypatch):
    """The Lakekeeper stand-in vends SHORT_S-second STS credentials through the proxy. A static use
    of the first vended credentials is refused once they expire; the table's refreshing AWS profile
    (``lakeflow credential-process``) keeps writing and reading and never sends an expired token."""
    proxy = s3_expiring.proxy
    lakekeeper = make_lakekeeper(s3=s3_expiring.account)
    lakekeeper.warehouse.sts_validity_s = SHORT_S
    settings = settings_for(lakekeeper, LAKEFLOW_HOME=str(tmp_path))
    catalog = LakekeeperCatalog.from_settings(settings)
    handle = catalog.register(settings.namespace, settings.table)
    bucket, _, prefix = handle.location.removeprefix("s3://").partition("/")
    profile = write_profile(tmp_path / "aws", settings.namespace, settings.table,
                            catalog_settings(settings, catalog.warehouse_id))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(profile.credentials_file))
    monkeypatch.setenv("AWS_CONFIG_FILE", os.devnull)

    first = catalog.credentials(settings.namespace, settings.table)  # what a static job would keep
    vended = first.merged()
    static = boto3.client("s3", endpoint_url=s3_expiring.url, region_name="us-east-1",
                          aws_access_key_id=vended["s3.access-key-id"],
                          aws_secret_access_key=vended["s3.secret-access-key"],
                          aws_session_token=vended["s3.session-token"])
    static.put_object(Bucket=bucket, Key=f"{prefix}/static-0.json", Body=b"[]")
    assert proxy.expiries[vended["s3.session-token"]] <= time.time() + SHORT_S + 1

    session = boto3.Session(profile_name=profile.name)
    s3 = session.client("s3", endpoint_url=s3_expiring.url, region_name="us-east-1")
    started, written = time.monotonic(), []
    while time.monotonic() - started < 2 * SHORT_S + 1:  # past the first expiry and the next
        key = f"{prefix}/refreshing-{len(written)}.json"
        s3.put_object(Bucket=bucket, Key=key, Body=b"[]")
        written.append(key)
        time.sleep(1.0)
    assert first.expires_at is not None and time.time() > first.expires_at.timestamp() + SHORT_S
    listed = s3.list_objects_v2(Bucket=bucket, Prefix=f"{prefix}/refreshing-")["Contents"]
    assert sorted(o["Key"] for o in listed) == sorted(written)
    assert s3.get_object(Bucket=bucket, Key=written[0])["Body"].read() == b"[]"
    assert proxy.refused == 0, "the refreshing route sent an expired token"

    _refused(lambda: static.put_object(Bucket=bucket, Key=f"{prefix}/static-1.json", Body=b"[]"))
    assert proxy.refused == 1
    # botocore refreshes 15 min (advisory) / 10 min (mandatory) before Expiration: with credentials
    # of seconds, every call re-runs the credential process (one Lakekeeper /credentials call each).
    re_vends = len(lakekeeper.calls("GET", "/credentials")) - 1  # minus the static job's
    assert re_vends >= len(written) + 2
