"""One way to build an HTTP client: a requests ``Session`` with retries, timeouts and auth.

Retries are urllib3's ``Retry`` mounted through a requests ``HTTPAdapter``: exponential backoff
with jitter on 429/500/502/503/504 and on connection errors, ``Retry-After`` honoured. POST and
DELETE are retried too: callers that mutate send an ``Idempotency-Key``, which the adapter
re-sends unchanged with every attempt. Used by the Lakekeeper client, the OAuth2 token fetch and
the lineage harvester's Flink REST client.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, TypeVar, Union

import requests
from requests.adapters import HTTPAdapter
from requests.auth import AuthBase
from urllib3.util.retry import Retry

from lakeflow import __version__

USER_AGENT = f"lakeflow/{__version__}"
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
RETRY_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "POST", "DELETE", "PATCH"})

S = TypeVar("S", bound=requests.Session)


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
    verify: Union[bool, str] = True
    retry_statuses: frozenset = RETRY_STATUSES  # e.g. without 500 where a 500 is a deterministic answer

    def retry(self) -> Retry:
        """The urllib3 retry policy these options describe."""
        return Retry(
            total=self.max_retries,
            allowed_methods=RETRY_METHODS,
            status_forcelist=self.retry_statuses,
            backoff_factor=self.backoff,
            backoff_max=self.backoff_max,
            backoff_jitter=self.jitter,
            respect_retry_after_header=True,
            retry_after_max=self.retry_after_max,
            raise_on_status=False,  # the last answer comes back: its error body is the message
        )


class _Adapter(HTTPAdapter):
    """An ``HTTPAdapter`` that applies a default timeout to requests that set none."""

    def __init__(self, options: HttpOptions) -> None:
        self._timeout = options.timeout
        super().__init__(max_retries=options.retry())

    def send(self, request: requests.PreparedRequest, *args: Any, **kwargs: Any) -> requests.Response:
        if kwargs.get("timeout") is None:
            kwargs["timeout"] = self._timeout
        return super().send(request, *args, **kwargs)


def configure(session: S, options: HttpOptions, auth: Optional[AuthBase] = None) -> S:
    """Mount the retrying, timing-out adapter on ``session`` and set User-Agent, TLS and auth."""
    adapter = _Adapter(options)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    session.headers["User-Agent"] = USER_AGENT
    session.verify = options.verify
    if auth is not None:
        session.auth = auth
    return session


def new_session(options: HttpOptions = HttpOptions(), auth: Optional[AuthBase] = None) -> requests.Session:
    """A new requests ``Session`` configured by :func:`configure`."""
    return configure(requests.Session(), options, auth)
