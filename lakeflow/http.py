"""One way to build an HTTP client: a requests ``Session`` with retries, timeouts and auth.

Retries are urllib3's ``Retry`` mounted through a requests ``HTTPAdapter``: exponential backoff
with jitter on 429/500/502/503/504 and on connection errors, ``Retry-After`` honoured. POST and
DELETE are retried too: callers that mutate send an ``Idempotency-Key``, which the adapter
re-sends unchanged with every attempt. Used by the Lakekeeper client, the OAuth2 token fetch and
the lineage harvester's Flink REST client.

Credentials go to the configured origin only: a redirect to another origin (scheme, host, port) is
refused (:class:`RedirectRefused`) by every session made here, before anything is sent there.
:func:`read_body` reads a streamed answer within a wall-clock deadline and a size limit.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urljoin, urlsplit

import requests
import urllib3
from requests.adapters import HTTPAdapter
from requests.auth import AuthBase
from urllib3.util.retry import Retry

from lakeflow import __version__

USER_AGENT = f"lakeflow/{__version__}"
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
RETRY_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "POST", "DELETE", "PATCH"})

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


class RedirectRefused(requests.RequestException):
    """A redirect to another origin than the one asked (no request was sent there)."""


class AnswerRefused(requests.RequestException):
    """An answer took longer than its deadline or was larger than allowed."""


def origin(url: str) -> Origin:
    """``(scheme, host, port)`` of ``url``, the port made explicit for http and https."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    return scheme, (parts.hostname or ""), parts.port or {"http": 80, "https": 443}.get(scheme)


def _origin_text(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname}" + (f":{parts.port}" if parts.port else "")


def _refuse_cross_origin_redirect(response: requests.Response, **kwargs: Any) -> None:
    """A response hook: raise on a redirect whose target is another origin than the request's."""
    target = response.headers.get("Location") if response.is_redirect else None
    if target is None or origin(urljoin(response.url, target)) == origin(response.url):
        return
    response.close()
    to = _origin_text(urljoin(response.url, target))
    raise RedirectRefused(
        f"redirect from {_origin_text(response.url)} to {to} refused: credentials go to the "
        "configured origin only (configure the URL it redirects to instead)",
        response=response,
    )


def read_body(response: requests.Response, deadline: float, max_bytes: int, cut: bool = False) -> bytes:
    """The body of a streamed ``response``, read in pieces as they arrive until ``deadline``
    (``time.monotonic()``; a piece is awaited at most the read timeout). Larger than ``max_bytes``:
    refused, or with ``cut`` its first ``max_bytes``. Closes the response."""
    chunks: list[bytes] = []
    size = 0
    limit = max_bytes if cut else max_bytes + 1
    try:
        while size < limit:
            if time.monotonic() > deadline:
                raise AnswerRefused(f"answer not complete within its deadline ({size} bytes received)")
            chunk = response.raw.read1(64 * 1024, decode_content=True)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
            size += len(chunk)
    except urllib3.exceptions.HTTPError as exc:  # what requests' own reading would have wrapped
        raise requests.ConnectionError(f"{type(exc).__name__}: {exc}") from exc
    finally:
        response.close()
    if cut:
        return b"".join(chunks)[:max_bytes]
    raise AnswerRefused(f"answer larger than {_size(max_bytes)} refused")


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
