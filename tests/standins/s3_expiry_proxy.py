"""An S3 + STS endpoint that refuses expired session tokens, as AWS does: a proxy in front of moto.

moto (5.2) checks that an assumed role's session token matches its access key, never whether it
has expired (``moto/iam/access_control.py``, ``AssumedRoleAccessKey``). This proxy forwards every
request byte for byte (request line, all headers including Host, the body whether framed by
Content-Length or ``Transfer-Encoding: chunked``, ``aws-chunked`` payloads included;
``Expect: 100-continue`` goes to moto and its interim answers come back) and streams moto's answers
back unchanged. From the STS answers it forwards (``<SessionToken>`` + ``<Expiration>`` of
AssumeRole, GetSessionToken, AssumeRoleWithWebIdentity, ...) it learns when each session token
expires; a later request carrying an expired known token (``X-Amz-Security-Token`` header, or query
parameter of a presigned URL) is answered by the proxy itself with AWS's answer: S3 ``400
ExpiredToken`` (STS / IAM: ``403 ExpiredToken``). Tokens it never saw pass through: moto decides.
"""

from __future__ import annotations

import base64
import io
import os
import re
import secrets
import select
import socket
import socketserver
import threading
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from email.utils import formatdate
from typing import Any, BinaryIO, Callable, Iterator, Optional
from urllib.parse import parse_qs, urlsplit
from xml.sax.saxutils import escape, unescape

import pytest

from tests.standins.lakekeeper import S3Account

Sink = Optional[Callable[[bytes], Any]]  # where relayed bytes go (None: read and drop)
LINE_MAX = 65536
BLOCK = 64 * 1024
LEARN_MAX = 1 << 20  # XML answers up to this size are read whole and scanned for credentials
CONTINUE_WAIT_S = 1.0  # how long to wait for the server's 100 Continue (as curl and botocore do)
_CREDENTIALS = re.compile(rb"<Credentials>(.*?)</Credentials>", re.S)
_TOKEN = re.compile(rb"<SessionToken>([^<]+)</SessionToken>")
_EXPIRATION = re.compile(rb"<Expiration>([^<]+)</Expiration>")
_SCOPE = re.compile(r"Credential=[^/,\s]+/\d{8}/[^/]+/([^/]+)/aws4_request")
_QUERY_NS = {"sts": "https://sts.amazonaws.com/doc/2011-06-15/", "iam": "https://iam.amazonaws.com/doc/2010-05-08/"}


# -- HTTP/1.1 framing: read a head, copy a body as it is --------------------------------------------


def read_head(src: BinaryIO) -> list[bytes]:
    """The start line and header lines (raw, CRLF kept, blank line last); [] at a clean EOF."""
    lines: list[bytes] = []
    while True:
        line = src.readline(LINE_MAX)
        if not line:
            if lines:
                raise ConnectionError("connection closed inside a message head")
            return []
        if not lines and line in (b"\r\n", b"\n"):
            continue  # a stray CRLF between messages
        lines.append(line)
        if line in (b"\r\n", b"\n"):
            return lines


def header_fields(head: list[bytes]) -> dict[str, str]:
    """Header fields by lower-case name (the last one wins; enough for the fields read here)."""
    out: dict[str, str] = {}
    for line in head[1:-1]:
        name, _, value = line.decode("latin-1").partition(":")
        out[name.strip().lower()] = value.strip()
    return out


def _copy_exact(src: BinaryIO, sink: Sink, size: int) -> None:
    while size > 0:
        block = src.read(min(size, BLOCK))
        if not block:
            raise ConnectionError("connection closed inside a message body")
        if sink is not None:
            sink(block)
        size -= len(block)


def _copy_chunked(src: BinaryIO, sink: Sink, data: Optional[list[bytes]] = None) -> None:
    """Copy a chunked body (chunk-size lines, chunks, last chunk, trailers) unchanged; ``data``
    collects the decoded payload."""
    while True:
        line = src.readline(LINE_MAX)
        if not line:
            raise ConnectionError("connection closed inside a chunked body")
        if sink is not None:
            sink(line)
        size = int(line.split(b";", 1)[0].strip(), 16)
        if size == 0:
            while True:  # trailer fields, up to the blank line
                line = src.readline(LINE_MAX)
                if sink is not None:
                    sink(line)
                if line in (b"\r\n", b"\n", b""):
                    return
        if data is None:
            _copy_exact(src, sink, size + 2)
        else:
            chunk = src.read(size + 2)
            if len(chunk) != size + 2:
                raise ConnectionError("connection closed inside a chunk")
            data.append(chunk[:size])
            if sink is not None:
                sink(chunk)


def _copy_body(src: BinaryIO, headers: dict[str, str], sink: Sink) -> None:
    """A request body: chunked, Content-Length, or none."""
    if "chunked" in headers.get("transfer-encoding", "").lower():
        _copy_chunked(src, sink)
    else:
        _copy_exact(src, sink, int(headers.get("content-length") or 0))


def _has_body(headers: dict[str, str]) -> bool:
    return "chunked" in headers.get("transfer-encoding", "").lower() or int(headers.get("content-length") or 0) > 0


def _query_token(target: str) -> Optional[str]:
    """A presigned URL's session token (``X-Amz-Security-Token``; SigV2 URLs spell it lower-case)."""
    for name, values in parse_qs(urlsplit(target).query).items():
        if name.lower() == "x-amz-security-token":
            return values[0]
    return None


def _closes(headers: dict[str, str]) -> bool:
    return "close" in headers.get("connection", "").lower()


# -- AWS's answers to an expired token --------------------------------------------------------------


def _service(target: str, headers: dict[str, str]) -> str:
    """The signing service of a request (its credential scope); S3 when it names none."""
    scope = headers.get("authorization") or "Credential=" + "".join(
        parse_qs(urlsplit(target).query).get("X-Amz-Credential", [""]))
    found = _SCOPE.search(scope)
    return found.group(1) if found else "s3"


def expired_token_answer(service: str, token: str, method: str, close: bool) -> bytes:
    """What AWS answers a request signed with an expired session token.

    S3: ``400 Bad Request``, ``x-amz-request-id`` / ``x-amz-id-2``, ``application/xml``
    ``<Error><Code>ExpiredToken</Code><Message>The provided token has expired.</Message>
    <Token-0>…</Token-0><RequestId>…</RequestId><HostId>…</HostId></Error>`` (HEAD: no body).
    STS / IAM (query protocol): ``403`` ``<ErrorResponse><Error><Type>Sender</Type>
    <Code>ExpiredToken</Code><Message>The security token included in the request is expired``.
    """
    if service == "s3":
        request_id = secrets.token_hex(8).upper()
        host_id = base64.b64encode(os.urandom(56)).decode()
        body = ('<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>ExpiredToken</Code>'
                f'<Message>The provided token has expired.</Message><Token-0>{escape(token)}</Token-0>'
                f'<RequestId>{request_id}</RequestId><HostId>{host_id}</HostId></Error>').encode()
        status = "400 Bad Request"
        fields = [("x-amz-request-id", request_id), ("x-amz-id-2", host_id), ("Content-Type", "application/xml")]
    else:
        request_id = str(uuid.uuid4())
        body = (f'<ErrorResponse xmlns="{_QUERY_NS.get(service, _QUERY_NS["sts"])}">\n  <Error>\n'
                '    <Type>Sender</Type>\n    <Code>ExpiredToken</Code>\n'
                '    <Message>The security token included in the request is expired</Message>\n'
                f'  </Error>\n  <RequestId>{request_id}</RequestId>\n</ErrorResponse>\n').encode()
        status = "403 Forbidden"
        fields = [("x-amzn-RequestId", request_id), ("Content-Type", "text/xml")]
    if method == "HEAD":
        body = b""
    fields += [("Content-Length", str(len(body))), ("Date", formatdate(usegmt=True)), ("Server", "AmazonS3")]
    if close:
        fields.append(("Connection", "close"))
    head = f"HTTP/1.1 {status}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in fields) + "\r\n"
    return head.encode("latin-1") + body


# -- the proxy --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Forwarded:
    """A request the proxy relayed to moto (header names lower-case)."""

    method: str
    target: str
    headers: dict[str, str]


class ExpiryProxy:
    """The proxy on a free 127.0.0.1 port. ``.url``; ``.refused``: requests it answered
    ``ExpiredToken``; ``.expiries``: session token -> expiry (epoch seconds) learned from STS;
    ``.forwarded``: the requests relayed to moto."""

    def __init__(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.expiries: dict[str, float] = {}
        self.refused = 0
        self.forwarded: list[Forwarded] = []
        self._lock = threading.Lock()
        proxy = self

        class Handler(_Handler):
            owner = proxy

        self._server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> "ExpiryProxy":
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True,
                         name="s3-expiry-proxy").start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def learn(self, body: bytes) -> None:
        """Record the expiry of every session token in an STS answer."""
        for block in _CREDENTIALS.findall(body):
            token, expiration = _TOKEN.search(block), _EXPIRATION.search(block)
            if token and expiration:
                when = datetime.fromisoformat(unescape(expiration.group(1).decode().strip())).timestamp()
                with self._lock:
                    self.expiries[unescape(token.group(1).decode().strip())] = when

    def expired(self, token: str) -> bool:
        """A token this proxy saw STS hand out, now past its expiry."""
        with self._lock:
            when = self.expiries.get(token)
        return when is not None and time.time() >= when

    def refuse(self) -> None:
        with self._lock:
            self.refused += 1


class _Handler(socketserver.StreamRequestHandler):
    """One client connection: requests in turn, each relayed to a connection to moto."""

    owner: ExpiryProxy

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.up: Optional[socket.socket] = None
        self.up_r: Optional[io.BufferedReader] = None

    def finish(self) -> None:
        self._disconnect()
        super().finish()

    def handle(self) -> None:
        try:
            while self._one():
                pass
        except (ConnectionError, ValueError, OSError):
            pass  # a peer went away or spoke broken HTTP: drop the connection, as a server would

    def _one(self) -> bool:
        """Relay one request and its answer; False when the client connection must close."""
        head = read_head(self.rfile)
        if not head:
            return False
        method, target, _ = head[0].decode("latin-1").split(" ", 2)
        headers = header_fields(head)
        token = headers.get("x-amz-security-token") or _query_token(target)
        body, expect = _has_body(headers), headers.get("expect", "").lower() == "100-continue"
        if token and self.owner.expired(token):
            # Answer from the head alone; a body already on its way is read and dropped, one
            # held back by Expect: 100-continue is never asked for (the connection closes).
            close = _closes(headers) or (body and expect)
            if body and not expect:
                _copy_body(self.rfile, headers, None)
            self.owner.refuse()
            self.wfile.write(expired_token_answer(_service(target, headers), token, method, close))
            return not close
        self.owner.forwarded.append(Forwarded(method, target, headers))
        up = self._connect()
        up.sendall(b"".join(head))
        if body and expect and select.select([up], [], [], CONTINUE_WAIT_S)[0]:
            answer = read_head(self._answers())
            if not answer:
                raise ConnectionError("moto closed the connection without an answer")
            self.wfile.write(b"".join(answer))
            if not answer[0].split(b" ", 2)[1].startswith(b"1"):  # a final answer: no body wanted
                self._relay_body(method, answer)
                return False
        if body:
            _copy_body(self.rfile, headers, up.sendall)
        return self._relay_answer(method) and not _closes(headers)

    def _relay_answer(self, method: str) -> bool:
        """Interim answers, then the final one; False when either side closes after it."""
        while True:
            head = read_head(self._answers())
            if not head:
                raise ConnectionError("moto closed the connection without an answer")
            if head[0].split(b" ", 2)[1].startswith(b"1"):
                self.wfile.write(b"".join(head))
                continue
            return self._relay_body(method, head)

    def _relay_body(self, method: str, head: list[bytes]) -> bool:
        """Send an answer's head and body to the client (STS answers are first read whole and
        learned from); False when the connection closes after it."""
        fields = header_fields(head)
        status = int(head[0].split(b" ", 2)[1])
        length = fields.get("content-length")
        chunked = "chunked" in fields.get("transfer-encoding", "").lower()
        keep = not _closes(fields) and head[0].startswith(b"HTTP/1.1")
        if method == "HEAD" or status in (204, 304):
            self.wfile.write(b"".join(head))
        elif "xml" in fields.get("content-type", "") and (chunked or int(length or LEARN_MAX + 1) <= LEARN_MAX):
            raw: list[bytes] = []
            data: list[bytes] = []
            if chunked:
                _copy_chunked(self._answers(), raw.append, data)
            else:
                _copy_exact(self._answers(), raw.append, int(length or 0))
                data = raw
            self.owner.learn(b"".join(data))  # before the client can use what it carries
            self.wfile.write(b"".join(head + raw))
        else:
            self.wfile.write(b"".join(head))
            if chunked:
                _copy_chunked(self._answers(), self.wfile.write)
            elif length is not None:
                _copy_exact(self._answers(), self.wfile.write, int(length))
            else:  # delimited by the end of the connection
                while block := self._answers().read1(BLOCK):
                    self.wfile.write(block)
                keep = False
        if not keep:
            self._disconnect()
        return keep

    def _connect(self) -> socket.socket:
        """The connection to moto: reused while open, else a new one."""
        if self.up is not None and select.select([self.up], [], [], 0)[0]:
            self._disconnect()  # moto closed it (or sent something unasked): start afresh
        if self.up is None:
            self.up = socket.create_connection(self.owner.upstream, timeout=300)
            self.up.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.up_r = self.up.makefile("rb")
        return self.up

    def _answers(self) -> io.BufferedReader:
        assert self.up_r is not None, "no connection to moto"
        return self.up_r

    def _disconnect(self) -> None:
        if self.up is not None:
            self.up_r.close()
            self.up.close()
            self.up, self.up_r = None, None


@contextmanager
def run_expiry_proxy(moto_url: str) -> Iterator[ExpiryProxy]:
    """An :class:`ExpiryProxy` in front of the moto server at ``moto_url``, stopped on exit."""
    proxy = ExpiryProxy(moto_url).start()
    try:
        yield proxy
    finally:
        proxy.stop()


# -- the fixture ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExpiringS3:
    """moto with auth enforced (``moto_strict``) behind an :class:`ExpiryProxy`.

    ``.url``: the proxy, S3 and STS endpoint alike; ``.account``: an S3Account on the proxy with
    an IAM user allowed everything (what the Lakekeeper stand-in holds); ``.moto_url``: moto itself.
    """

    proxy: ExpiryProxy
    account: S3Account
    moto_url: str
    region: str = "us-east-1"

    @property
    def url(self) -> str:
        return self.proxy.url

    def client(self, service: str, **kwargs: Any) -> Any:
        """A boto3 client on the proxy (or ``endpoint_url``), as the IAM user unless keys are given. Parameter
        validation is off: botocore refuses DurationSeconds < 900 itself; moto takes seconds."""
        import boto3
        from botocore.config import Config

        kwargs.setdefault("aws_access_key_id", self.account.access_key)
        kwargs.setdefault("aws_secret_access_key", self.account.secret_key)
        kwargs.setdefault("config", Config(parameter_validation=False))
        kwargs.setdefault("endpoint_url", self.url)
        return boto3.client(service, region_name=self.region, **kwargs)


@pytest.fixture
def s3_expiring(moto_strict: S3Account) -> Iterator[ExpiringS3]:
    """S3 + STS that refuse expired session tokens: the session's strict moto behind a fresh proxy."""
    with run_expiry_proxy(moto_strict.endpoint) as proxy:
        yield ExpiringS3(proxy, S3Account(proxy.url, moto_strict.region, moto_strict.access_key,
                                          moto_strict.secret_key), moto_strict.endpoint, moto_strict.region)
