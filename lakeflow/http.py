"""One way to build an HTTP client: a requests ``Session`` with retries, timeouts and auth, or a
:class:`Pool` on urllib3 alone for one origin answering many small requests.

Retries are urllib3's ``Retry`` (mounted through a requests ``HTTPAdapter`` for a session):
exponential backoff with jitter on 429/500/502/503/504 and on connection errors, ``Retry-After``
honoured. POST and DELETE are retried too: callers that mutate send an ``Idempotency-Key``, which
is re-sent unchanged with every attempt. Sessions serve the Lakekeeper client and the OAuth2 token
fetch; a :class:`Pool` the lineage harvester's Flink REST and SQL Gateway clients (a request costs
a third of what it costs through requests).

Credentials go to the configured origin only: a redirect to another origin (scheme, host, port) is
refused (:class:`RedirectRefused`) by every session and pool made here, before anything is sent
there. :func:`read_answer` (:func:`read_body` for a session's) reads a streamed answer within a
wall-clock deadline and a size limit.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urljoin, urlsplit

import requests
import urllib3
from requests.adapters import HTTPAdapter
from requests.auth import AuthBase
from urllib3.exceptions import (
    ConnectTimeoutError,
    HTTPError,
    NewConnectionError,
    ProxyError,
    ResponseError,
    SSLError,
)
from urllib3.util.retry import Retry

from lakeflow import __version__
from lakeflow.errors import ServiceUnavailable

USER_AGENT = f"lakeflow/{__version__}"
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
RETRY_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "POST", "DELETE", "PATCH"})
MAX_REDIRECTS = 30  # within the origin, as requests
POOL_SIZE = 10  # connections kept alive per pool, as requests
_ACCEPT_ENCODING = {"Accept-Encoding": urllib3.make_headers(accept_encoding=True)["accept-encoding"]}

S = TypeVar("S", bound=requests.Session)
Origin = tuple[str, str, int | None]  # scheme, host, port


@dataclass(frozen=True)
class HttpOptions:
    """How patient a client is: per-request timeout, retries and their backoff, TLS verification.

    urllib3's schedule: the first retry is immediate, then ``backoff`` × 2, × 4, … seconds (plus
    up to ``jitter`` seconds at random), at most ``backoff_max``. A server's ``Retry-After``
    replaces the pause, capped at ``retry_after_max``.
    """

    timeout: float = 30.0
    max_retries: int = 5
    backoff: float = 0.5
    backoff_max: float = 30.0
    jitter: float = 0.5
    retry_after_max: int = 120
    verify: bool | str = True
    retry_statuses: frozenset = RETRY_STATUSES  # e.g. without 500 where a 500 is a deterministic answer
    retry_methods: frozenset = RETRY_METHODS  # e.g. reads only, where a repeated write is not safe
    deadline: float = 120.0  # for callers reading with read_body: seconds for one whole answer's body

    def retry(self) -> Retry:
        """The urllib3 retry policy these options describe."""
        return Retry(
            total=self.max_retries,
            allowed_methods=self.retry_methods,
            status_forcelist=self.retry_statuses,
            backoff_factor=self.backoff,
            backoff_max=self.backoff_max,
            backoff_jitter=self.jitter,
            respect_retry_after_header=True,
            retry_after_max=self.retry_after_max,
            raise_on_status=False,  # the last answer comes back: its error body is the message
        )


class RedirectRefused(ServiceUnavailable, requests.RequestException):
    """A redirect to another origin than the one asked (no request was sent there)."""


class AnswerRefused(ServiceUnavailable, requests.RequestException):
    """An answer took longer than its deadline or was larger than allowed."""


def origin(url: str) -> Origin:
    """``(scheme, host, port)`` of ``url``, the port made explicit for http and https."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    return scheme, (parts.hostname or ""), parts.port or {"http": 80, "https": 443}.get(scheme)


def _origin_text(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname}" + (f":{parts.port}" if parts.port else "")


def _refusal(url: str, target: str) -> str:
    return (
        f"redirect from {_origin_text(url)} to {_origin_text(target)} refused: credentials go to the "
        "configured origin only (configure the URL it redirects to instead)"
    )


def _refuse_cross_origin_redirect(response: requests.Response, **kwargs: Any) -> None:
    """A response hook: raise on a redirect whose target is another origin than the request's."""
    target = response.headers.get("Location") if response.is_redirect else None
    if target is None or origin(urljoin(response.url, target)) == origin(response.url):
        return
    response.close()
    raise RedirectRefused(_refusal(response.url, urljoin(response.url, target)), response=response)


def read_answer(response: urllib3.BaseHTTPResponse, deadline: float, max_bytes: int, cut: bool = False) -> bytes:
    """The body of a ``response`` opened with ``preload_content=False``, read in pieces as they
    arrive until ``deadline`` (``time.monotonic()``; a piece is awaited at most the read timeout).
    Larger than ``max_bytes``: refused, or with ``cut`` its first ``max_bytes``. Closes the response
    (a connection read to its end is back in its pool by then)."""
    chunks: list[bytes] = []
    size = 0
    limit = max_bytes if cut else max_bytes + 1
    try:
        while size < limit:
            if time.monotonic() > deadline:
                raise AnswerRefused(f"answer not complete within its deadline ({size} bytes received)")
            chunk = response.read1(64 * 1024, decode_content=True)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
            size += len(chunk)
    finally:
        response.close()
    if cut:
        return b"".join(chunks)[:max_bytes]
    raise AnswerRefused(f"answer larger than {_size(max_bytes)} refused")


def read_body(response: requests.Response, deadline: float, max_bytes: int, cut: bool = False) -> bytes:
    """:func:`read_answer` of a streamed requests ``response``, urllib3's errors as requests' own."""
    try:
        return read_answer(response.raw, deadline, max_bytes, cut)
    except HTTPError as exc:  # what requests' own reading would have wrapped
        raise requests.ConnectionError(f"{type(exc).__name__}: {exc}") from exc
    finally:
        response.close()


def _size(n: int) -> str:
    return f"{n // (1024 * 1024)} MiB" if n % (1024 * 1024) == 0 else f"{n} bytes"


class _Adapter(HTTPAdapter):
    """An ``HTTPAdapter`` that applies a default timeout to requests that set none."""

    def __init__(self, options: HttpOptions) -> None:
        self._timeout = options.timeout
        super().__init__(max_retries=options.retry())

    def send(self, request: requests.PreparedRequest, *args: Any, **kwargs: Any) -> requests.Response:
        if kwargs.get("timeout") is None:
            kwargs["timeout"] = self._timeout
        return super().send(request, *args, **kwargs)


def configure(session: S, options: HttpOptions, auth: AuthBase | None = None) -> S:
    """Mount the retrying, timing-out adapter on ``session``, refuse redirects to other origins and
    set User-Agent, TLS and auth."""
    adapter = _Adapter(options)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    session.hooks["response"].append(_refuse_cross_origin_redirect)
    session.headers["User-Agent"] = USER_AGENT
    session.verify = options.verify
    if auth is not None:
        session.auth = auth
    return session


def new_session(options: HttpOptions = HttpOptions(), auth: AuthBase | None = None) -> requests.Session:
    """A new requests ``Session`` configured by :func:`configure`."""
    return configure(requests.Session(), options, auth)


class Pool:
    """Requests to one origin on urllib3 alone, over keep-alive connections shared between threads:
    retries and timeout as ``options`` say, ``headers`` (e.g. auth) on every request, a redirect
    followed within the origin and refused to another. Proxy, CA bundle and ``.netrc`` come from
    the environment as requests reads them, once here rather than per request."""

    def __init__(self, url: str, options: HttpOptions, headers: Mapping[str, str] | None = None) -> None:
        from requests.utils import DEFAULT_CA_BUNDLE_PATH, get_environ_proxies, get_netrc_auth, prepend_scheme_if_needed

        self.headers = {"User-Agent": USER_AGENT, "Accept": "*/*", **_ACCEPT_ENCODING, **(headers or {})}
        if not any(name.lower() == "authorization" for name in self.headers):
            netrc = get_netrc_auth(url)
            if netrc:
                self.headers["Authorization"] = urllib3.make_headers(basic_auth=":".join(netrc))["authorization"]
        verify = options.verify
        if verify is True:
            verify = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE") or DEFAULT_CA_BUNDLE_PATH
        tls = (
            {"cert_reqs": "CERT_NONE"}
            if verify is False
            else {"cert_reqs": "CERT_REQUIRED", ("ca_cert_dir" if os.path.isdir(verify) else "ca_certs"): verify}
        )
        settings: dict[str, Any] = {
            "maxsize": POOL_SIZE,
            "retries": options.retry(),
            "timeout": urllib3.Timeout(options.timeout),
            **tls,
        }
        proxies = get_environ_proxies(url)
        proxy = proxies.get(urlsplit(url).scheme.lower()) or proxies.get("all")
        if proxy:
            proxy = prepend_scheme_if_needed(proxy, "http")
            login = urllib3.util.parse_url(proxy).auth
            proxy_headers = urllib3.make_headers(proxy_basic_auth=login) if login else None
            self._manager: urllib3.PoolManager = urllib3.ProxyManager(proxy, proxy_headers=proxy_headers, **settings)
        else:
            self._manager = urllib3.PoolManager(**settings)
        self._redirects = Retry(total=None, redirect=MAX_REDIRECTS)

    def request(
        self, method: str, url: str, body: bytes | None = None, headers: Mapping[str, str] | None = None
    ) -> urllib3.BaseHTTPResponse:
        """The answer to ``method url``, its body unread (:func:`read_answer`). Raises urllib3's
        errors (:func:`failure` words them) and :class:`RedirectRefused`."""
        sent = {**self.headers, **headers} if headers else self.headers
        redirects = self._redirects
        while True:
            response = self._manager.urlopen(
                method, url, body=body, headers=sent, redirect=False, preload_content=False
            )
            location = response.get_redirect_location()
            if not location:
                return response
            target = urljoin(url, location)
            if origin(target) != origin(url):
                response.close()
                raise RedirectRefused(_refusal(url, target))
            response.drain_conn()
            redirects = redirects.increment(method, url, response=response)
            if response.status == 303:
                method, body = "GET", None
            url = target

    def close(self) -> None:
        self._manager.clear()


# urllib3's reasons by the names requests gives them (NewConnectionError is a ConnectTimeoutError;
# a ResponseError is a redirect too many: answers are never retried into one, raise_on_status=False)
_FAILURES = (
    (NewConnectionError, "ConnectionError"),
    (ConnectTimeoutError, "ConnectTimeout"),
    (ProxyError, "ProxyError"),
    (SSLError, "SSLError"),
    (ResponseError, "TooManyRedirects"),
)


def failure(exc: Exception) -> str:
    """A :class:`Pool` request's failure as requests words it (``ConnectionError: …``,
    ``RedirectRefused: …``), for error messages."""
    if not isinstance(exc, HTTPError):
        return f"{type(exc).__name__}: {exc}"
    reason = exc.reason if isinstance(exc, urllib3.exceptions.MaxRetryError) else exc
    name = next((name for cls, name in _FAILURES if isinstance(reason, cls)), "ConnectionError")
    return f"{name}: {exc}"
