"""Catalog errors, and the one place a catalog's failure becomes one of them.

Two sources, one classification (:func:`_kind`, by the server's error ``type``, else its HTTP code):

- :func:`error_from` — a Lakekeeper answer (generic tables, management, ``/catalog/v1/config``):
  JSON ``{"error": {message, type, code, stack}}`` or plain text;
- :func:`iceberg_errors` / :func:`from_iceberg` — pyiceberg's exceptions from the Iceberg REST
  catalog (or its SQL catalog), which carry the server's ``"<type>: <message>"`` and the status in
  their class.

Messages name what was being done (``what``, e.g. ``commit to Iceberg table iot.t``) and hold the
server's words only: never a token, key or secret. Under Lakekeeper's authorization a refusal names
the principal (``principal``, :func:`lakeflow.auth.principal_name`) and the privilege to grant it
(:class:`Forbidden`), and what it cannot see is "not visible to" it as well as "does not exist".
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

from lakeflow.errors import LakeflowError, ServiceUnavailable


class CatalogError(LakeflowError, RuntimeError):
    """A catalog call failed; ``type`` / ``code`` / ``error_id`` carry the server's words when known."""

    def __init__(self, message: str, *, type: str = "", code: int = 0, error_id: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.type = type
        self.code = code
        self.error_id = error_id

    def __str__(self) -> str:
        parts = [" ".join(p for p in (str(self.code) if self.code else "", self.type) if p), self.message]
        text = ": ".join(p for p in parts if p)
        return f"{text} (error id {self.error_id})" if self.error_id else text


class TableNotFound(CatalogError):
    """The table does not exist (or is not visible to this principal)."""


class AccessDenied(CatalogError):
    """Not authenticated (401, 419) or not allowed (403)."""


class Forbidden(AccessDenied):
    """The principal may not do this (403 ``…ActionForbidden``; 401 on a grant): the message names the
    principal, the object and the privilege to grant."""


class CatalogUnavailable(CatalogError, ServiceUnavailable):
    """The catalog did not answer, was overloaded (429) or failed (5xx) after the retries."""


class CommitConflict(CatalogError):
    """The table changed while this run worked; nothing of this run became visible."""


class CommitStateUnknown(CatalogError):
    """The catalog failed during a commit: it may or may not have been applied."""


Kind = type[CatalogError]
_ERROR_ID = re.compile(r"Error ID:\s*(\S+)")
_TYPED = re.compile(r"^([A-Za-z][A-Za-z0-9]*): (.*)$", re.DOTALL)  # pyiceberg's "<type>: <message>"
_BY_TYPE: dict[str, Kind] = {
    "NoSuchGenericTableException": TableNotFound,  # Lakekeeper's generic tables
    "NoSuchTableException": TableNotFound,  # Iceberg REST
    "CommitFailedException": CommitConflict,
    "CommitStateUnknownException": CommitStateUnknown,
    "AuthenticationFailed": AccessDenied,
    "MissingAuthorizationHeader": AccessDenied,
}
_EXPLAINED: dict[Kind, str] = {
    CommitConflict: "the table changed while this run worked; nothing was committed — run again",
    CommitStateUnknown: "the catalog failed during the commit, which may or may not have been applied "
    "(a fresh load of the table tells; a new run checks)",
}


def _kind(type_: str, code: int) -> Kind:
    if type_ in _BY_TYPE:
        return _BY_TYPE[type_]
    if code in (401, 403, 419):
        return AccessDenied
    if code == 429 or code >= 500:
        return CatalogUnavailable
    return CatalogError


# Lakekeeper's refusals: "<Kind> action `<action>` forbidden on <object kind> '<name>' in warehouse `<id>`"
# (403) and "Unauthorized for action `<action>` on `<object>`" (401, the permission endpoints).
_FORBIDDEN = re.compile(
    r"action `(?P<action>\w+)` forbidden on (?P<kind>warehouse|namespace with name|generic table|table|view|project"
    r"|role|server) [`'](?P<name>[^`']+)[`']"
)
_UNAUTHORIZED = re.compile(r"^Unauthorized for action `(?P<action>\w+)` on `(?P<name>[^`]+)`")
# action → (what the principal may not do, the privilege that allows it), per Lakekeeper's documented grants
_PRIVILEGES: dict[str, tuple[str, str]] = {
    "read_data": ("read", "select"),
    "can_read_data": ("read", "select"),
    "write_data": ("write to", "modify"),
    "can_write_data": ("write to", "modify"),
    "can_commit": ("commit to", "modify"),
    "can_drop": ("drop", "modify"),
    "can_rename": ("rename", "modify"),
    "can_create_namespace": ("create namespaces in", "create"),
    "can_create_table": ("create tables in", "create"),
    "can_create_generic_table": ("create tables in", "create"),
    "can_create_view": ("create views in", "create"),
    "can_get_metadata": ("see", "describe"),
    "can_list_warehouses": ("list the warehouses of", "describe"),
    "can_list_namespaces": ("list the namespaces of", "describe"),
    "can_list_everything": ("list", "describe"),
}
_MISSING = {
    "NoSuchWarehouseException": "the warehouse",
    "NoSuchNamespaceException": "the namespace",
    "NoSuchGenericTableException": "the table",
    "NoSuchTableException": "the table",
    "NoSuchViewException": "the view",
}


def _who(principal: str) -> str:
    return principal or "this principal"


def _refusal(message: str, principal: str) -> str | None:
    """One line naming the principal, the object and the privilege to grant; None when ``message`` is
    no authorization refusal Lakekeeper words."""
    if found := _FORBIDDEN.search(message):
        kind = "namespace" if found["kind"] == "namespace with name" else found["kind"]
        verb, privilege = _PRIVILEGES.get(found["action"], (f"do {found['action']} on", "a privilege that allows it"))
        return f"{_who(principal)} may not {verb} {kind} {found['name']}: grant it {privilege} on it"
    if found := _UNAUTHORIZED.search(message):
        action = found["action"].removeprefix("can_").replace("_", " ")
        return f"{_who(principal)} may not {action} on {found['name']}: only its owner or a holder of manage_grants may"
    return None


def catalog_error(
    what: str,
    message: str,
    *,
    type: str = "",
    code: int = 0,
    error_id: str = "",
    kind: Kind | None = None,
    principal: str = "",
) -> CatalogError:
    """The :class:`CatalogError` subclass the server's ``type`` / ``code`` name (or ``kind``), its
    message led by ``what``; an authorization refusal is a :class:`Forbidden` naming ``principal``."""
    cls = kind or _kind(type, code)
    if code in (401, 403) and (refusal := _refusal(message, principal)):
        return Forbidden(f"{what}: {refusal}", type=type, code=code, error_id=error_id)
    if missing := _MISSING.get(type, "the table" if cls is TableNotFound else ""):
        text = f"{what}: {missing} does not exist or is not visible to {_who(principal)} ({message})"
        return cls(text, type=type, code=code, error_id=error_id)
    explained = _EXPLAINED.get(cls)
    text = f"{what}: {explained} ({message})" if explained else f"{what}: {message}"
    return cls(text, type=type, code=code, error_id=error_id)


def error_from(status: int, body: bytes, *, what: str, reason: str = "", principal: str = "") -> CatalogError:
    """The error a Lakekeeper answer ``status`` / ``body`` carries: JSON ``{"error": …}`` (type,
    message, code, the ``Error ID`` in its stack) or plain text (its first 500 characters)."""
    from pydantic import ValidationError

    from lakeflow.catalog.wire import IcebergErrorResponse

    try:
        error = IcebergErrorResponse.model_validate_json(body).error
    except ValidationError:
        text = " ".join(body.decode("utf-8", "replace").split())[:500] or reason or "no details"
        return catalog_error(what, text, code=status, principal=principal)
    error_id = next((m.group(1) for s in error.stack if (m := _ERROR_ID.search(s))), "")
    return catalog_error(
        what, error.message, type=error.type, code=error.code or status, error_id=error_id, principal=principal
    )


def unanswered(what: str, server: str, exc: Exception) -> CatalogUnavailable:
    """The error for a request ``server`` (e.g. ``Lakekeeper at <url>``) gave no complete answer to:
    refused, reset, timed out, too slow or too big."""
    cause = exc.args[0] if exc.args else exc  # urllib3's reason, e.g. "… Connection refused"
    reason = str(getattr(cause, "reason", None) or cause)
    return CatalogUnavailable(f"{what}: {server} did not answer: {reason}", type=type(exc).__name__)


_Iceberg = tuple[type[Exception], str, int, Kind | None]


def _iceberg_codes() -> list[_Iceberg]:
    """pyiceberg's exception classes → the Iceberg REST type they stand for, the HTTP status, and
    our class where pyiceberg's already says it (else the type / status decide); most specific first."""
    from pyiceberg import exceptions as e

    return [
        (e.CommitFailedException, "CommitFailedException", 409, CommitConflict),
        (e.CommitStateUnknownException, "CommitStateUnknownException", 500, CommitStateUnknown),
        (e.NoSuchTableError, "NoSuchTableException", 404, TableNotFound),
        (e.NoSuchNamespaceError, "NoSuchNamespaceException", 404, None),
        (e.ForbiddenError, "ForbiddenException", 403, None),
        (e.UnauthorizedError, "NotAuthorizedException", 401, None),
        (e.OAuthError, "NotAuthorizedException", 401, None),
        (e.AuthorizationExpiredError, "AuthorizationExpiredException", 419, None),
        (e.TooManyRequestsError, "TooManyRequestsException", 429, None),
        (e.ServiceUnavailableError, "ServiceUnavailableException", 503, None),
        (e.ServerError, "ServerErrorException", 500, None),
        (e.BadRequestError, "BadRequestException", 400, None),
        (e.RESTError, "RESTException", 0, None),
        (e.TableAlreadyExistsError, "AlreadyExistsException", 409, None),
        (e.NamespaceAlreadyExistsError, "AlreadyExistsException", 409, None),
    ]


def from_iceberg(exc: Exception, *, what: str, principal: str = "") -> CatalogError | None:
    """The :class:`CatalogError` for a pyiceberg exception (None when ``exc`` is none of its catalog
    errors). The server's type is taken from pyiceberg's ``"<type>: <message>"`` when present."""
    import requests

    if isinstance(exc, requests.RequestException):
        # requests puts the PreparedRequest here, whose url is a str (a Request's may be bytes)
        url = exc.request.url if exc.request is not None else None
        return unanswered(
            what,
            f"the Iceberg REST catalog at {url.split('?', 1)[0]}"
            if isinstance(url, str) and url
            else "the Iceberg REST catalog",
            exc,
        )
    for cls, type_, code, kind in _iceberg_codes():
        if isinstance(exc, cls):
            message = " ".join(str(exc).split())[:500] or type(exc).__name__  # pyiceberg may quote a whole body
            typed = _TYPED.match(message)
            if typed:  # a REST answer: "<server's type>: <message>" (the type is the server's)
                type_, message = typed.group(1), typed.group(2)
            return catalog_error(what, message, type=type_, code=code, kind=kind, principal=principal)
    return None


@contextmanager
def iceberg_errors(what: str, principal: str = "") -> Iterator[None]:
    """Raise pyiceberg's catalog errors (and lost answers) inside the block as :class:`CatalogError`\\ s."""
    try:
        yield
    except Exception as exc:
        mapped = from_iceberg(exc, what=what, principal=principal)
        if mapped is None:
            raise
        raise mapped from exc
