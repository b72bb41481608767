"""Bootstrap as the configured admin, then ensure the warehouse and the namespaces."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from lakeflow.catalog.errors import CatalogError
from lakeflow.stack.config import StackConfig
from lakeflow.stack.server import ALLOW_ALL, LakekeeperAdmin, Report


class NotServerAdmin(CatalogError):
    """The server is bootstrapped (with authorization) and the configured principal is not its admin."""


@dataclass(frozen=True)
class BootstrapResult:
    warehouse_id: str
    bootstrapped: bool  # this run bootstrapped the server
    warehouse_created: bool
    namespaces_created: tuple[tuple[str, ...], ...]
    authorization: bool = False  # the server checks permissions (an authz-backend other than allow-all)
    admin: str | None = None  # the admin's principal id, with authorization


def bootstrap_stack(
    admin: LakekeeperAdmin, config: StackConfig, report: Report, namespaces: Sequence[tuple[str, ...]] = ()
) -> BootstrapResult:
    """Bootstrap as the admin (or check it is the admin), ensure the warehouse, ensure the namespace
    and ``namespaces`` (a pipeline's streams'; parents first, each once); report each step."""
    authorization, bootstrapped, admin_id = _bootstrap(admin, config, report)

    warehouse_id, created = _ensure_warehouse(admin, config, report)
    report(f"warehouse {config.warehouse}: {'created' if created else 'exists'} ({warehouse_id})")

    made: list[tuple[str, ...]] = []
    wanted = dict.fromkeys(ns[:depth] for ns in (config.namespace, *namespaces) for depth in range(1, len(ns) + 1))
    for levels in wanted:
        new = admin.create_namespace(warehouse_id, levels)
        report(f"namespace {'.'.join(levels)}: {'created' if new else 'exists'}")
        if new:
            made.append(levels)
    return BootstrapResult(warehouse_id, bootstrapped, created, tuple(made), authorization, admin_id)


def _bootstrap(admin: LakekeeperAdmin, config: StackConfig, report: Report) -> tuple[bool, bool, str | None]:
    """(authorization, bootstrapped by this call, the admin's principal id): a new server is
    bootstrapped at once by the configured principal, which becomes its admin; on a server already
    bootstrapped with authorization the configured principal must be its admin (else
    :class:`NotServerAdmin`, before anything is changed)."""
    info = admin.info()
    authorization = info.authz_backend != ALLOW_ALL
    if info.bootstrapped:
        report("server: already bootstrapped")
    elif admin.bootstrap():
        report("server: bootstrapped")
        if not authorization:
            return False, True, None
        me = admin.whoami()
        if me is None:
            raise CatalogError("bootstrap: this principal is no user of the server it bootstrapped (whoami: 404)")
        report(f"server: authorization {info.authz_backend}; admin {me} (this principal)")
        return True, True, me
    else:
        report("server: bootstrapped meanwhile by another principal")
    if not authorization:
        return False, False, None
    me = check_admin(admin, config)
    report(f"server: authorization {info.authz_backend}; admin {me} (this principal)")
    return True, False, me


def check_admin(admin: LakekeeperAdmin, config: StackConfig) -> str:
    """The configured principal's id when it is the server's admin or operator (directly or through a
    role: only they may read the server's assignments); else :class:`NotServerAdmin`, one line."""
    me = admin.whoami()
    if me is not None and admin.is_server_admin():
        return me
    raise NotServerAdmin(
        f"STACK_OAUTH_CLIENT_ID {config.client_id} ({me or 'no user of this server yet'}) is not the admin of "
        f"the Lakekeeper at {config.lakekeeper}, which is bootstrapped already: nothing was changed; set "
        "STACK_OAUTH_CLIENT_ID and STACK_OAUTH_CLIENT_SECRET to its admin's client "
        "(docs/lakekeeper.md#least-privilege)"
    )


def _ensure_warehouse(admin: LakekeeperAdmin, config: StackConfig, report: Report) -> tuple[str, bool]:
    """The warehouse's id, and whether this call created it (an existing one is kept as it is)."""
    existing = admin.find_warehouse(config.warehouse)
    if existing is None:
        new_id = admin.create_warehouse(config)
        if new_id is not None:
            return new_id, True
        existing = admin.find_warehouse(config.warehouse)  # created meanwhile: 409
        if existing is None:
            raise CatalogError(
                f"warehouse {config.warehouse} exists (409) but is not listed: "
                "is it deactivated, or in another project?"
            )
    _report_drift(existing, config, report)
    return str(existing["id"]), False


def _report_drift(existing: Mapping, config: StackConfig, report: Report) -> None:
    """Say so when an existing warehouse's storage differs from the configured one (not changed)."""
    have = existing.get("storage-profile") or {}
    want = config.storage_profile()
    for key in ("bucket", "key-prefix", "endpoint", "sts-enabled", "sts-role-arn", "assume-role-arn"):
        if key in want and _normalized(key, have.get(key)) != _normalized(key, want[key]):
            report(
                f"warning: warehouse {config.warehouse} has {key}={have.get(key)!r}, "
                f"configured {want[key]!r}; left as it is"
            )


def _normalized(key: str, value: object) -> object:
    """A profile value as Lakekeeper compares it: it stores an endpoint with a trailing '/'."""
    return value.rstrip("/") if key == "endpoint" and isinstance(value, str) else value
