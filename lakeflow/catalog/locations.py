"""Table locations checked before anything is written there or sent anywhere.

A location is a URI with a known scheme. Dot segments (``.``, ``..``, also percent-encoded: Hadoop and
Flink decode ``%2e%2e`` back to ``..``), backslashes, control characters, queries and fragments are
refused, so a location cannot step out of the place it names. Used on what users give
(``register --location``) and on what Lakekeeper answers (a table's ``base-location``).
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from urllib.parse import unquote, urlparse

from lakeflow.catalog.base import CatalogError


def _refuse(what: str, location: str, why: str) -> CatalogError:
    return CatalogError(f"{what} {location!r}: {why}", type="InvalidLocation", code=400)


def check_location(location: str, schemes: Collection[str], *, what: str = "location") -> str:
    """``location`` (trailing ``/`` removed) if it is a clean URI with one of ``schemes``.

    Object-store URIs need a bucket; ``file://`` URIs an absolute path on this host.
    """
    expected = " or ".join(f"{s}://" for s in schemes)
    if not location or any(ord(c) < 0x20 or c == "\x7f" for c in location):
        raise _refuse(what, location, f"expected a {expected} URI without control characters")
    parsed = urlparse(location)
    if not parsed.scheme or len(parsed.scheme) == 1:  # a path (also a Windows drive letter)
        raise _refuse(what, location, f"expected a {expected} URI, not a file path")
    if parsed.scheme.lower() not in schemes:
        raise _refuse(what, location, f"scheme {parsed.scheme!r} is not supported: expected {expected}")
    if parsed.query or parsed.fragment or "\\" in location:
        raise _refuse(what, location, "'?', '#' and '\\' are not allowed in a location")
    if parsed.scheme.lower() == "file":
        if parsed.netloc not in ("", "localhost"):
            raise _refuse(what, location, "a file:// location names no host: expected file:///path")
        if not parsed.path.startswith("/"):
            raise _refuse(what, location, "expected an absolute path: file:///path")
    elif not parsed.netloc:
        raise _refuse(what, location, f"expected {parsed.scheme}://<bucket>/<path>")
    if any(segment in (".", "..") for segment in unquote(parsed.path).split("/")):
        raise _refuse(what, location, "'.' and '..' path segments are not allowed")
    return location.rstrip("/")


def local_path(location: str) -> Path:
    """The filesystem path of a checked ``file://`` location (percent-decoded, as Hadoop reads it)."""
    return Path(unquote(urlparse(location).path))
