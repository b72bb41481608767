"""One way to build an HTTP client: a requests ``Session`` with retries, timeouts and auth, or a
:class:`Pool` on libcurl (pycurl) for one origin answering many small requests.

Retries are urllib3's ``Retry`` (mounted through a requests ``HTTPAdapter`` for a session; a
:class:`Pool` follows the same schedule): exponential backoff with jitter on 429/500/502/503/504
and on connection errors, ``Retry-After`` honoured. POST and DELETE are retried too: callers that
mutate send an ``Idempotency-Key``, which is re-sent unchanged with every attempt. Sessions serve
the Lakekeeper client and the OAuth2 token fetch; a :class:`Pool` the lineage harvester's Flink REST
and SQL Gateway clients (a request costs a quarter of the CPU it cost on urllib3 alone).

Credentials go to the configured origin only: a redirect to another origin (scheme, host, port) is
refused (:class:`RedirectRefused`) by every session and pool made here, before anything is sent
there. :func:`read_answer` (:func:`read_body` for a session's) reads a streamed answer within a
wall-clock deadline and a size limit; a :class:`Pool` reads each answer so.

requests and urllib3 are imported by the sessions' half only (a Pool's user, the harvest, starts
without them: ~45 ms): a session raises :class:`RedirectRefused` and :class:`AnswerRefused` as
requests' ``RequestException`` too (:func:`requests_error`), a Pool as lakeflow's alone.
"""

from __future__ import annotations

import functools
import math
import os
import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urljoin, urlsplit

from lakeflow import __version__
from lakeflow.errors import ServiceUnavailable

if TYPE_CHECKING:
    import requests
    import urllib3
    from requests.adapters import HTTPAdapter
    from requests.auth import AuthBase
    from urllib3.util.retry import Retry

USER_AGENT = f"lakeflow/{__version__}"
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
RETRY_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "POST", "DELETE", "PATCH"})
MAX_REDIRECTS = 30  # within the origin, as requests
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
CURLE_PROXY = 97  # libcurl's error for a proxy's handshake failing, which pycurl does not name

S = TypeVar("S", bound="requests.Session")
E = TypeVar("E", bound=Exception)
RETRY_AFTER_STATUSES = frozenset({413, 429, 503})  # urllib3's Retry.RETRY_AFTER_STATUS_CODES
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
    deadline: float = 120.0  # seconds for one whole answer's body (callers of read_body), or answer (a Pool's)

    def retry(self) -> Retry:
        """The urllib3 retry policy these options describe."""
        from urllib3.util.retry import Retry

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

    def backoff_time(self, failures: int) -> float:
        """The pause before the next attempt after ``failures`` in a row, as urllib3's ``Retry`` has it."""
        if failures <= 1:
            return 0.0
        return min(self.backoff_max, self.backoff * 2 ** (failures - 1) + random.random() * self.jitter)


class RedirectRefused(ServiceUnavailable):
    """A redirect to another origin than the one asked (no request was sent there)."""


class AnswerRefused(ServiceUnavailable):
    """An answer took longer than its deadline or was larger than allowed."""


@functools.cache
def requests_error(kind: type[E]) -> type[E]:
    """``kind`` that is a requests ``RequestException`` too, under the same name: what a session
    raises, so that its callers take it as one of requests' own (made once, at a session's first)."""
    import requests

    return type(kind.__name__, (kind, requests.RequestException), {"__module__": __name__, "__doc__": kind.__doc__})


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
    raise requests_error(RedirectRefused)(_refusal(response.url, urljoin(response.url, target)), response=response)


def read_answer(response: urllib3.BaseHTTPResponse, deadline: float, max_bytes: int, cut: bool = False) -> bytes:
    """The body of a ``response`` opened with ``preload_content=False``, read in pieces as they
    arrive until ``deadline`` (``time.monotonic()``; a piece is awaited at most the read timeout).
    Larger than ``max_bytes``: refused, or with ``cut`` its first ``max_bytes``. Closes the response
    (a connection read to its end is back in its pool by then)."""
    refused = requests_error(AnswerRefused)
    chunks: list[bytes] = []
    size = 0
    limit = max_bytes if cut else max_bytes + 1
    try:
        while size < limit:
            if time.monotonic() > deadline:
                raise refused(f"answer not complete within its deadline ({size} bytes received)")
            chunk = response.read1(64 * 1024, decode_content=True)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
            size += len(chunk)
    finally:
        response.close()
    if cut:
        return b"".join(chunks)[:max_bytes]
    raise refused(f"answer larger than {_size(max_bytes)} refused")


def read_body(response: requests.Response, deadline: float, max_bytes: int, cut: bool = False) -> bytes:
    """:func:`read_answer` of a streamed requests ``response``, urllib3's errors as requests' own."""
    import requests
    from urllib3.exceptions import HTTPError

    try:
        return read_answer(response.raw, deadline, max_bytes, cut)
    except HTTPError as exc:  # what requests' own reading would have wrapped
        raise requests.ConnectionError(f"{type(exc).__name__}: {exc}") from exc
    finally:
        response.close()


def _size(n: int) -> str:
    return f"{n // (1024 * 1024)} MiB" if n % (1024 * 1024) == 0 else f"{n} bytes"


@functools.cache
def _adapter() -> Callable[[HttpOptions], HTTPAdapter]:
    """An ``HTTPAdapter`` that applies a default timeout to requests that set none (made once)."""
    from requests.adapters import HTTPAdapter

    class Adapter(HTTPAdapter):
        def __init__(self, options: HttpOptions) -> None:
            self._timeout = options.timeout
            super().__init__(max_retries=options.retry())

        def send(self, request: requests.PreparedRequest, *args: Any, **kwargs: Any) -> requests.Response:
            if kwargs.get("timeout") is None:
                kwargs["timeout"] = self._timeout
            return super().send(request, *args, **kwargs)

    return Adapter


def configure(session: S, options: HttpOptions, auth: AuthBase | None = None) -> S:
    """Mount the retrying, timing-out adapter on ``session``, refuse redirects to other origins and
    set User-Agent, TLS and auth."""
    adapter = _adapter()(options)
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
    import requests

    return configure(requests.Session(), options, auth)


class RequestFailed(ServiceUnavailable):
    """A :class:`Pool` request that got no complete answer. ``kind`` names it as requests would
    (``ConnectionError``, ``ConnectTimeout``, ``ReadTimeout``, ``ProxyError``, ``SSLError``,
    ``InvalidURL``, ``TooManyRedirects``); ``retry``: whether another attempt may do better (a
    connection failed before any of the answer's body came)."""

    def __init__(self, kind: str, message: str, retry: bool = False) -> None:
        super().__init__(message)
        self.kind = kind
        self.retry = retry


@dataclass(frozen=True)
class Reply:
    """A :class:`Pool` answer, read whole: status, ``Content-Type`` and body (an error's cut)."""

    status: int
    content_type: str | None
    body: bytes


class _Sink:
    """One attempt's body as libcurl hands it over, up to ``max_bytes`` and by the deadline."""

    __slots__ = ("chunks", "size", "max_bytes", "deadline", "late", "full")

    def __init__(self, max_bytes: int, deadline: float) -> None:
        self.chunks: list[bytes] = []
        self.size = 0
        self.max_bytes, self.deadline = max_bytes, deadline
        self.late = self.full = False

    def write(self, chunk: bytes) -> int | None:
        """Keep ``chunk``, or return 0 (libcurl stops the transfer) past the deadline or ``max_bytes``."""
        if time.monotonic() > self.deadline:
            self.late = True
            return 0
        if self.size + len(chunk) > self.max_bytes:
            self.chunks.append(chunk[: self.max_bytes - self.size])
            self.full = True
            return 0
        self.chunks.append(chunk)
        self.size += len(chunk)
        return None


class Pool:
    """Requests to one origin on libcurl (pycurl), each thread with its own handle and kept-alive
    connection: retries and timeouts as ``options`` say (a read stalled for ``timeout``, rounded up
    to whole seconds, is given up: libcurl's low-speed limit; libcurl ends a transfer at its
    deadline even while no byte arrives), ``headers`` (e.g. auth) on every
    request, a redirect followed within the origin and refused to another, each answer read whole
    within its deadline and ``max_bytes`` (an error's cut at ``error_bytes``). Proxy, CA bundle and
    ``.netrc`` come from the environment as requests reads them, once here rather than per request.
    pycurl is in the compaction environment (the harvester's), not the ingestion job's: imported
    by a Pool only."""

    def __init__(
        self,
        url: str,
        options: HttpOptions,
        headers: Mapping[str, str] | None = None,
        max_bytes: int = 64 * 1024 * 1024,
        error_bytes: int = 64 * 1024,
    ) -> None:
        import pycurl

        self.options, self.max_bytes, self.error_bytes = options, max_bytes, error_bytes
        self.headers = {"User-Agent": USER_AGENT, "Accept": "*/*", **(headers or {})}
        if not any(name.lower() == "authorization" for name in self.headers) and _may_have_netrc():
            from requests.utils import get_netrc_auth
            from urllib3 import make_headers

            netrc = get_netrc_auth(url)
            if netrc:
                self.headers["Authorization"] = make_headers(basic_auth=":".join(netrc))["authorization"]
        self._lines = [f"{name}: {value}" for name, value in self.headers.items()]
        proxy = None
        if _may_have_proxies():
            from requests.utils import get_environ_proxies, prepend_scheme_if_needed

            proxies = get_environ_proxies(url)
            proxy = proxies.get(urlsplit(url).scheme.lower()) or proxies.get("all")
            proxy = prepend_scheme_if_needed(proxy, "http") if proxy else None
        self._proxied = bool(proxy)
        verify = options.verify
        if verify is True:
            verify = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE") or _ca_bundle()
        if verify is False:
            tls: list[tuple[int, Any]] = [(pycurl.SSL_VERIFYPEER, 0), (pycurl.SSL_VERIFYHOST, 0)]
        else:
            tls = (
                [(pycurl.CAPATH, verify), (pycurl.CAINFO, None)] if os.path.isdir(verify) else [(pycurl.CAINFO, verify)]
            )
        self._settings = [
            (pycurl.NOSIGNAL, 1),  # no SIGALRM for timeouts: handles run in threads
            (pycurl.PROTOCOLS, pycurl.PROTO_HTTP | pycurl.PROTO_HTTPS),
            (pycurl.ACCEPT_ENCODING, ""),  # every encoding libcurl decodes (gzip, deflate, br, zstd)
            (pycurl.CONNECTTIMEOUT_MS, max(1, round(options.timeout * 1000))),
            (pycurl.LOW_SPEED_LIMIT, 1),  # the read timeout: less than a byte a second for …
            (pycurl.LOW_SPEED_TIME, max(1, math.ceil(options.timeout))),  # … this many seconds
            (pycurl.PROXY, proxy or ""),  # "": none, whatever else says
            *tls,
        ]
        self._local = threading.local()
        self._handles: list[Any] = []
        self._lock = threading.Lock()

    def _curl(self) -> Any:
        """This thread's handle."""
        curl = getattr(self._local, "curl", None)
        if curl is None:
            import pycurl

            curl = self._local.curl = pycurl.Curl()
            for option, value in self._settings:
                if value is None:
                    curl.unsetopt(option)
                else:
                    curl.setopt(option, value)
            with self._lock:
                self._handles.append(curl)
        return curl

    def request(
        self,
        method: str,
        url: str,
        body: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        deadline: float = math.inf,
    ) -> Reply:
        """The answer to ``method url``, read by ``deadline`` (``time.monotonic()``; at most
        ``options.deadline`` from now). Raises :class:`RequestFailed`, :class:`RedirectRefused`
        and :class:`AnswerRefused`."""
        import pycurl

        curl = self._curl()
        curl.setopt(
            pycurl.HTTPHEADER, self._lines + [f"{k}: {v}" for k, v in headers.items()] if headers else self._lines
        )
        deadline = min(deadline, time.monotonic() + self.options.deadline)
        for _ in range(MAX_REDIRECTS + 1):
            reply = self._retried(curl, method, url, body, deadline)
            target = curl.getinfo(pycurl.REDIRECT_URL) if reply.status in REDIRECT_STATUSES else None
            if not target:
                return reply
            if origin(target) != origin(url):
                raise RedirectRefused(_refusal(url, target))
            if reply.status == 303:
                method, body = "GET", None
            url = target
        raise RequestFailed("TooManyRedirects", f"Exceeded {MAX_REDIRECTS} redirects (the last to {url})")

    def _retried(self, curl: Any, method: str, url: str, body: bytes | None, deadline: float) -> Reply:
        """An answer, retried as ``options`` say: after a failed connection and on
        ``retry_statuses`` (honouring ``Retry-After``), never past the deadline."""
        import pycurl

        options = self.options
        retries = options.max_retries if method in options.retry_methods else 0
        failures = 0
        while True:
            try:
                reply = self._attempt(curl, method, url, body, deadline)
            except RequestFailed as exc:
                if not exc.retry or failures == retries:
                    raise
                later = 0
            else:
                if reply.status not in options.retry_statuses or failures == retries:
                    return reply
                later = curl.getinfo(pycurl.RETRY_AFTER) if reply.status in RETRY_AFTER_STATUSES else 0
            failures += 1
            pause = min(later, options.retry_after_max) if later else options.backoff_time(failures)
            time.sleep(max(0.0, min(pause, deadline - time.monotonic())))

    def _attempt(self, curl: Any, method: str, url: str, body: bytes | None, deadline: float) -> Reply:
        import pycurl

        if time.monotonic() > deadline:
            raise AnswerRefused("answer not complete within its deadline (0 bytes received)")
        sink = _Sink(self.max_bytes, deadline)
        curl.setopt(pycurl.URL, url)
        curl.setopt(pycurl.CUSTOMREQUEST, method)
        if body is None:
            curl.setopt(pycurl.HTTPGET, 1)
        else:
            curl.setopt(pycurl.POSTFIELDS, body)
        curl.setopt(pycurl.WRITEFUNCTION, sink.write)
        curl.setopt(pycurl.TIMEOUT_MS, max(1, math.ceil((deadline - time.monotonic()) * 1000)))
        try:
            curl.perform()
        except pycurl.error as exc:
            if sink.late or time.monotonic() >= deadline:
                raise AnswerRefused(f"answer not complete within its deadline ({sink.size} bytes received)") from None
            if not sink.full:
                code, message = exc.args
                raise self._failure(curl, code, message, sink.size) from None
        status = curl.getinfo(pycurl.RESPONSE_CODE)
        if status >= 400:
            return Reply(status, curl.getinfo(pycurl.CONTENT_TYPE), b"".join(sink.chunks)[: self.error_bytes])
        if sink.full:
            raise AnswerRefused(f"answer larger than {_size(self.max_bytes)} refused")
        return Reply(status, curl.getinfo(pycurl.CONTENT_TYPE), b"".join(sink.chunks))

    def _failure(self, curl: Any, code: int, message: str, received: int) -> RequestFailed:
        """libcurl's error ``code`` as requests would name the failure; retried unless the body had begun."""
        import pycurl

        if received:
            return RequestFailed("ConnectionError", f"reading the answer failed ({received} bytes received): {message}")
        tls = {getattr(pycurl, name) for name in dir(pycurl) if name.startswith("E_SSL")} | {pycurl.E_USE_SSL_FAILED}
        if code == pycurl.E_OPERATION_TIMEDOUT:
            kind = "ReadTimeout" if curl.getinfo(pycurl.REQUEST_SIZE) else "ConnectTimeout"
        elif code in (pycurl.E_COULDNT_RESOLVE_PROXY, CURLE_PROXY) or (
            self._proxied and code == pycurl.E_COULDNT_CONNECT
        ):
            kind = "ProxyError"
        elif code in tls:
            kind = "SSLError"
        elif code in (pycurl.E_URL_MALFORMAT, pycurl.E_UNSUPPORTED_PROTOCOL):
            return RequestFailed("InvalidURL", message)
        else:
            kind = "ConnectionError"
        return RequestFailed(kind, message, retry=True)

    def close(self) -> None:
        """Close every thread's handle (a later request opens a new one)."""
        with self._lock:
            for curl in self._handles:
                curl.close()
            self._handles.clear()
            self._local = threading.local()


def _may_have_netrc() -> bool:
    """Whether requests' ``get_netrc_auth`` may find a ``.netrc`` (it looks no further than these)."""
    return "NETRC" in os.environ or any(os.path.exists(os.path.expanduser(f"~/{f}")) for f in (".netrc", "_netrc"))


def _may_have_proxies() -> bool:
    """Whether the environment names a proxy (``*_proxy``, any case, set: what ``getproxies`` reads on Linux)."""
    return any(value and name.lower().endswith("_proxy") for name, value in os.environ.items())


def _ca_bundle() -> str:
    """requests' default CA bundle (certifi's, as ``requests.utils.DEFAULT_CA_BUNDLE_PATH``)."""
    from certifi import where

    return where()


def failure(exc: Exception) -> str:
    """A :class:`Pool` request's failure as requests words it (``ConnectionError: …``,
    ``RedirectRefused: …``; an :class:`AnswerRefused` as it is), for error messages."""
    if isinstance(exc, AnswerRefused):
        return str(exc)
    return f"{exc.kind if isinstance(exc, RequestFailed) else type(exc).__name__}: {exc}"
