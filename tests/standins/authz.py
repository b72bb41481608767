"""Lakekeeper's authorization with OpenFGA (``AUTHZ_BACKEND=openfga``), as the stand-ins model it.

What the real Lakekeeper 0.13.3 answered with OpenFGA on is ``shared/lakekeeper-api/recorded-authz-0.13.3``
(tests/integration/test_lakekeeper_authz_replay.py replays it against the stand-ins). One
:class:`Authorizer` is shared by the stand-ins that use it (``LakekeeperStandin.authz``,
``ManagementStandin.authz``, ``tests.support.lakehouse.LakekeeperWithIceberg``); off (None) by default.

Identity. A request's bearer token is a token of the OAuth stand-in (``subject_of``); its principal is
``oidc~<sub>``, the OAuth client id (401 ``MissingAuthorizationHeader`` / ``AuthenticationFailed``
otherwise). A principal becomes a *user* on its first ``GET /catalog/v1/config`` (or by bootstrapping);
before that ``GET /management/v1/whoami`` answers 404 ``UserNotFound``. Grants name principals, users
or not.

Bootstrap. While the server is not bootstrapped, any authenticated principal may bootstrap it and
becomes server ``admin`` (``operator`` with ``is-operator``) and ``project_admin`` of the default
project; afterwards 400 ``CatalogAlreadyBootstrapped``.

Privileges. :data:`KINDS` is lakeflow's own account of what Lakekeeper's grants mean, and
:class:`Authorizer` keeps the grants and works out what follows from them:

- objects: a ``server`` holds a ``project``, which holds ``warehouse``\\ s and ``role``\\ s; a warehouse
  holds ``namespace``\\ s (which nest), a namespace ``lakekeeper_table``\\ s and
  ``lakekeeper_generic_table``\\ s. The creator of a warehouse, namespace, table or role owns it.
- a principal holds a privilege on an object when it is granted to the principal or to a role it is a
  member of (a role's owner and its member roles' members too), when what it holds on the enclosing
  object gives it, or when another privilege it holds there includes it: ownership includes all,
  ``modify`` includes ``select`` includes ``describe``, ``create`` includes ``describe`` — so
  ``create`` on a namespace gives ``describe`` on every table in it: metadata and location, no
  credentials.
- an object is visible (``can_get_metadata``) to whoever may describe it or anything in it: a grant
  on a table makes its namespace and warehouse visible.
- ``pass_grants`` lets a holder grant what it holds, ``manage_grants`` anything; owners manage an
  object's grants unless an enclosing namespace or warehouse has *managed access*.

What a refusal looks like (as recorded): an object the principal cannot see is answered as if it
did not exist (404 ``NoSuchWarehouseException`` / ``NoSuchNamespaceException`` /
``NoSuchTableException`` / ``NoSuchGenericTableException``); a visible one whose action is not
allowed 403 ``<Kind>ActionForbidden`` naming the action (``tests.standins.lakekeeper.forbidden``,
:func:`forbidden_on_object`); on the permission endpoints 401 ``Unauthorized`` naming the
``can_grant_*`` action. Vended credentials follow the privilege (:meth:`Authorizer.storage_access`):
``modify`` → read-write-delete, ``select`` → read-only, ``describe`` alone → none.

The permission endpoints (:meth:`Authorizer.answer`, served by the management stand-in):
``GET|POST /management/v1/permissions/{server|project|project/{id}|warehouse/{id}|namespace/{id}|
warehouse/{wh}/table/{id}|warehouse/{wh}/generic-table/{id}|role/{id}}/assignments`` (a batch
``{"writes": […], "deletes": […]}`` of ``{"type": <privilege>, "user": <principal>}`` or
``{"type": …, "role": <role id>}``, all or nothing: 409 ``TupleAlreadyExistsError``, 404
``TupleNotFoundError``), ``GET …/authorizer-actions``, ``GET|POST …/{warehouse|namespace}/{id}
[/managed-access]``, ``POST /management/v1/role``, ``DELETE /management/v1/role/{id}``.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from werkzeug.exceptions import HTTPException
from werkzeug.routing import Map, Rule
from werkzeug.wrappers import Request

from tests.standins.lakekeeper import DEFAULT_PROJECT, ApiError, warehouse_object

IDP = "oidc"  # Lakekeeper names a principal <idp>~<subject>
PARENT = "parent"  # the tuple linking an object to the one it is in

# -- what the grants mean -------------------------------------------------------------------------
#
# lakeflow's own formulation, written from Lakekeeper's documented grants
# (https://docs.lakekeeper.io/docs/0.13.x/authorization-openfga/: the "Grants" table, ownership,
# pass_grants / manage_grants, managed access), the action names of its management API and
# refusals, and the answers the real server gave in the recording.

# What an action needs: any one alternative, each privileges that must all be held. A privilege is
# held on the object itself, or "<kind>.<privilege>" on the enclosing object of that kind.
Needs = tuple[tuple[str, ...], ...]
VISIBLE = "visible"  # not granted: held by whoever may describe the object or anything in it


def either(*alternatives: str | tuple[str, ...]) -> Needs:
    """What an action needs: one of ``alternatives``, a privilege or a tuple of privileges."""
    return tuple((a,) if isinstance(a, str) else a for a in alternatives)


@dataclass(frozen=True)
class Kind:
    """One kind of object: what can be granted on it, what a privilege gives, what an action needs."""

    inside: tuple[str, ...]  # the kinds of object it can be in
    grantable: tuple[str, ...]  # as the assignments endpoints accept and list them, in their order
    includes: Mapping[str, tuple[str, ...]]  # privilege -> the privileges it gives on the same object
    from_enclosing: Mapping[str, str]  # privilege on the enclosing object -> the one it gives here
    actions: Mapping[str, Needs]
    listed_actions: tuple[str, ...]  # what GET …/authorizer-actions can list, in its order


DATA_PRIVILEGES = ("describe", "select", "create", "modify")  # pass_grants lets a holder grant these
# an owner holds every data privilege, and manages the grants unless under managed access (_Privileges.held)
DATA_INCLUDES = {"ownership": DATA_PRIVILEGES, "modify": ("select",), "select": ("describe",),
                 "create": ("describe",)}


def _data_kind(inside: tuple[str, ...], grantable: tuple[str, ...], from_enclosing: Mapping[str, str],
               actions: Mapping[str, Needs], listed_actions: tuple[str, ...]) -> Kind:
    """A warehouse, namespace or table: the data privileges, and who may grant them — whoever
    manages its grants, or for a data privilege whoever holds it and ``pass_grants``; who may grant
    anything may read the assignments."""
    grants = {("can_change_ownership" if p == "ownership" else f"can_grant_{p}"):
              either("manage_grants", (p, "pass_grants")) if p in DATA_PRIVILEGES else either("manage_grants")
              for p in grantable}
    readers = tuple(dict.fromkeys(alternative for needs in grants.values() for alternative in needs))
    includes = {p: tuple(q for q in given if q in grantable) for p, given in DATA_INCLUDES.items() if p in grantable}
    return Kind(inside, grantable, includes, from_enclosing,
                {**actions, **grants, "can_read_assignments": readers}, listed_actions)


def _same(*privileges: str) -> dict[str, str]:
    """Privileges held on the enclosing object that give the same one here."""
    return {p: p for p in privileges}


_ADMIN = ("server.admin",)  # the server's admin administers the project's grants and sees it
_TABLE_ACTIONS = {"can_get_metadata": either(VISIBLE), "can_include_in_list": either(VISIBLE),
                  "read_data": either("select"), "write_data": either("modify"), "can_drop": either("modify"),
                  "can_rename": either("modify")}
_TABLE_LISTED = ("read_assignments", "grant_pass_grants", "grant_manage_grants", "grant_describe",
                 "grant_select", "grant_modify", "change_ownership")
_TABLE_GRANTABLE = ("ownership", "pass_grants", "manage_grants", "describe", "select", "modify")
_CONTAINER_GRANTABLE = ("ownership", "pass_grants", "manage_grants", "describe", "select", "create", "modify")
_CONTAINER_LISTED = ("read_assignments", "grant_create", "grant_describe", "grant_modify", "grant_select",
                     "grant_pass_grants", "grant_manage_grants")
_PROJECT_GRANTS = ("role_creator", "create", "describe", "modify", "select", "project_admin", "security_admin",
                   "data_admin")

KINDS: dict[str, Kind] = {
    "server": Kind(
        inside=(), grantable=("admin", "operator"), includes={}, from_enclosing={},
        actions={action: either("admin", "operator")
                 for action in ("can_list_users", "can_read_assignments", "can_grant_admin", "can_grant_operator")},
        listed_actions=("read_assignments", "grant_admin")),
    "project": Kind(
        inside=("server",),
        grantable=("project_admin", "security_admin", "data_admin", "role_creator", "describe", "select", "create",
                   "modify"),
        includes={"project_admin": ("security_admin", "data_admin", "modify"),
                  "security_admin": ("role_creator", "describe"), "data_admin": ("create", "describe"),
                  "modify": ("select",), "select": ("describe",), "create": ("describe",)},
        from_enclosing={"operator": "project_admin"},
        actions={"can_create_warehouse": either("create"), "can_create_role": either("role_creator"),
                 **{action: either(VISIBLE, _ADMIN) for action in
                    ("can_get_metadata", "can_include_in_list", "can_list_warehouses", "can_list_roles")},
                 "can_read_assignments": either("security_admin", _ADMIN),
                 **{f"can_grant_{p}": either("project_admin" if p == "project_admin" else "security_admin", _ADMIN)
                    for p in _PROJECT_GRANTS}},
        listed_actions=("read_assignments", *(f"grant_{p}" for p in _PROJECT_GRANTS))),
    "warehouse": _data_kind(
        inside=("project",), grantable=_CONTAINER_GRANTABLE,
        from_enclosing={**_same(*DATA_PRIVILEGES), "data_admin": "modify", "security_admin": "manage_grants"},
        actions={"can_create_namespace": either("create"), "can_set_managed_access": either("manage_grants"),
                 **{action: either(VISIBLE) for action in
                    ("can_get_metadata", "can_get_config", "can_list_namespaces", "can_include_in_list")}},
        listed_actions=(*_CONTAINER_LISTED, "change_ownership")),
    "namespace": _data_kind(
        inside=("warehouse", "namespace"), grantable=_CONTAINER_GRANTABLE,
        from_enclosing=_same(*DATA_PRIVILEGES, "manage_grants"),
        actions={**{action: either("create") for action in
                    ("can_create_namespace", "can_create_table", "can_create_generic_table")},
                 "can_set_managed_access": either("manage_grants"),
                 **{action: either(VISIBLE) for action in ("can_get_metadata", "can_include_in_list",
                                                           "can_list_namespaces", "can_list_tables",
                                                           "can_list_generic_tables")}},
        listed_actions=_CONTAINER_LISTED),
    "lakekeeper_table": _data_kind(
        inside=("namespace",), grantable=_TABLE_GRANTABLE,
        from_enclosing=_same("describe", "select", "modify", "manage_grants"),
        actions={**_TABLE_ACTIONS, "can_commit": either("modify")}, listed_actions=_TABLE_LISTED),
    "lakekeeper_generic_table": _data_kind(
        inside=("namespace",), grantable=_TABLE_GRANTABLE,
        from_enclosing=_same("describe", "select", "modify", "manage_grants"),
        actions=_TABLE_ACTIONS, listed_actions=_TABLE_LISTED),
    "role": Kind(
        inside=("project",), grantable=("assignee", "ownership"), includes={"ownership": ("assignee",)},
        from_enclosing={},
        actions={"can_assume": either("assignee"),
                 **{action: either("ownership", "project.security_admin")
                    for action in ("can_grant_assignee", "can_change_ownership", "can_delete")},
                 "can_read_assignments": either(f"project.{VISIBLE}", _ADMIN)},
        listed_actions=("assume", "can_grant_assignee", "can_change_ownership", "read_assignments")),
}


@dataclass
class User:
    id: str  # oidc~<subject>
    name: str
    last_updated_with: str  # "update-endpoint" (bootstrap) | "config-call-creation"
    created_at: str = field(default_factory=lambda: _now())

    def view(self) -> dict[str, Any]:
        return {"name": self.name, "email": None, "id": self.id, "user-type": "human",
                "last-updated-with": self.last_updated_with, "created-at": self.created_at, "updated-at": None}


@dataclass
class Role:
    id: str
    name: str
    description: str | None
    project_id: str
    created_at: str = field(default_factory=lambda: _now())

    def view(self) -> dict[str, Any]:
        return {"id": self.id, "ident": f"lakekeeper~{self.id}", "provider-id": "lakekeeper", "source-id": self.id,
                "name": self.name, "description": self.description, "project-id": self.project_id,
                "created-at": self.created_at, "updated-at": None}


class Authorizer:
    """The grants, users and roles of one server, and what the grants allow (:data:`KINDS`)."""

    def __init__(self, subject_of: Callable[[str], str | None], *, project_id: str = DEFAULT_PROJECT) -> None:
        self.subject_of = subject_of  # bearer token -> the subject it was issued to, None if invalid
        self.server_id = str(uuid.uuid4())
        self.project_id = project_id
        self.users: dict[str, User] = {}
        self.roles: dict[str, Role] = {}
        # (object, privilege or PARENT) -> its subjects, in the order written: user:<principal>,
        # role:<id>#assignee (the role's members), or for PARENT the enclosing object
        self._tuples: dict[tuple[str, str], dict[str, None]] = {}
        self._managed: set[str] = set()  # the warehouses and namespaces with managed access
        self._lock = threading.RLock()
        self._link(self.project, self.server)

    @property
    def server(self) -> str:
        return f"server:{self.server_id}"

    @property
    def project(self) -> str:
        return f"project:{self.project_id}"

    # -- identity ------------------------------------------------------------------------------

    def principal(self, request: Request) -> str:
        """The principal the request's bearer token stands for (401 without a valid one)."""
        header = request.headers.get("Authorization")
        if not header:
            raise ApiError(401, "MissingAuthorizationHeader", "Missing Authorization Header")
        subject = self.subject_of(header.removeprefix("Bearer ").strip())
        if subject is None:
            raise ApiError(401, "AuthenticationFailed", "Authentication failed")
        return f"{IDP}~{subject}"

    def ensure_user(self, principal: str, how: str = "config-call-creation") -> User:
        """The principal's user, created (``how``) when it has none yet."""
        with self._lock:
            if principal not in self.users:
                self.users[principal] = User(principal, principal.split("~", 1)[1], how)
            return self.users[principal]

    def bootstrap(self, principal: str, *, operator: bool = False) -> None:
        """``principal`` becomes server admin (or operator) and the default project's admin."""
        self.ensure_user(principal, "update-endpoint")
        self.write(self.server, "operator" if operator else "admin", _user(principal))
        self.write(self.project, "project_admin", _user(principal))

    # -- objects -------------------------------------------------------------------------------

    def add_warehouse(self, warehouse_id: str, owner: str | None = None) -> str:
        """Register a warehouse of the project (owned by ``owner``); returns its object."""
        return self.add_child(warehouse_object(warehouse_id), self.project, owner)

    def add_child(self, obj: str, parent: str, owner: str | None = None) -> str:
        """Register ``obj`` (a warehouse, namespace, table or role) in ``parent``, owned by ``owner``."""
        self._link(obj, parent)
        if owner is not None:
            self.write(obj, "ownership", _user(owner))
        return obj

    def remove(self, obj: str) -> None:
        """Forget an object: its grants, managed access and links, and every grant to it."""
        with self._lock:
            self._managed.discard(obj)
            for key in list(self._tuples):
                subjects = self._tuples[key]
                if key[0] == obj:
                    del self._tuples[key]
                    continue
                for subject in [s for s in subjects if s == obj or s.startswith(f"{obj}#")]:
                    del subjects[subject]

    def set_managed_access(self, obj: str, managed: bool) -> None:
        """Turn managed access on a warehouse or namespace on or off."""
        with self._lock:
            (self._managed.add if managed else self._managed.discard)(obj)

    def _link(self, obj: str, parent: str) -> None:
        assert _kind(parent) in KINDS[_kind(obj)].inside, f"{obj} cannot be in {parent}"
        self.write(obj, PARENT, parent)

    def _enclosing(self, obj: str) -> str | None:
        return next(iter(self._tuples.get((obj, PARENT), {})), None)

    def _contents(self, obj: str) -> list[str]:
        return [o for (o, relation), parents in self._tuples.items() if relation == PARENT and obj in parents]

    def _under_managed_access(self, obj: str) -> bool:
        """Whether a warehouse or namespace ``obj`` is in has managed access."""
        enclosing = self._enclosing(obj)
        while enclosing is not None:
            if enclosing in self._managed:
                return True
            enclosing = self._enclosing(enclosing)
        return False

    # -- grants and checks ---------------------------------------------------------------------

    def write(self, obj: str, relation: str, subject: str) -> None:
        """Add a tuple (a grant, an ownership, a role membership or a link)."""
        with self._lock:
            self._tuples.setdefault((obj, relation), {})[subject] = None

    def holds(self, obj: str, relation: str, subject: str) -> bool:
        """Whether the tuple itself is there (not what follows from it)."""
        with self._lock:
            return subject in self._tuples.get((obj, relation), {})

    def delete(self, obj: str, relation: str, subject: str) -> None:
        """Remove a tuple (if it is there)."""
        with self._lock:
            self._tuples.get((obj, relation), {}).pop(subject, None)

    def grant(self, principal: str, privilege: str, obj: str) -> None:
        """Grant ``privilege`` on ``obj`` to ``principal`` (``oidc~<client id>``) as an admin would."""
        assert privilege in KINDS[_kind(obj)].grantable, f"{privilege} cannot be granted on {obj}"
        self.write(obj, privilege, _user(principal))

    def allowed(self, principal: str, action: str, obj: str) -> bool:
        """Whether ``principal`` may do ``action`` (a name of its kind's ``actions``) on ``obj``."""
        with self._lock:
            return _Privileges(self, principal).meet(KINDS[_kind(obj)].actions[action], obj)

    def storage_access(self, principal: str, table: str) -> str | None:
        """What vended credentials ``principal`` gets for ``table``: "write", "read" or None."""
        if self.allowed(principal, "write_data", table):
            return "write"
        return "read" if self.allowed(principal, "read_data", table) else None

    def _acting_as(self, principal: str) -> set[str]:
        """The subjects a grant to ``principal`` may name: itself and every role it is a member of
        (as the role's assignee or owner, or as a member of a member role)."""
        subjects = {_user(principal)}
        roles = {o for o, _ in self._tuples if _kind(o) == "role"}
        joined = True
        while joined:
            joined = False
            for role in roles - {s.removesuffix("#assignee") for s in subjects}:
                if "assignee" in _with_included(KINDS["role"], self._granted(role, subjects)):
                    subjects.add(f"{role}#assignee")
                    joined = True
        return subjects

    def _granted(self, obj: str, subjects: set[str]) -> set[str]:
        """The privileges granted on ``obj`` to any of ``subjects``."""
        return {p for p in KINDS[_kind(obj)].grantable if subjects & self._tuples.get((obj, p), {}).keys()}

    # -- the permission endpoints --------------------------------------------------------------

    def answer(self, request: Request, principal: str) -> tuple[int, Any]:
        """Serve a permission or role endpoint: (status, JSON payload or None)."""
        try:
            endpoint, args = _PERMISSIONS.bind_to_environ(request.environ).match()
        except HTTPException:
            return 404, None  # as axum answers a route it does not have
        body = json.loads(request.get_data() or b"null")
        return getattr(self, f"_{endpoint}")(request, principal, body, **args)

    def _object(self, request: Request, kind: str, ident: str = "", warehouse: str = "") -> str:
        if kind == "server":
            return self.server
        if kind == "project":
            return f"project:{ident or request.headers.get('x-project-id') or self.project_id}"
        return f"{kind}:{warehouse}/{ident}" if warehouse else f"{kind}:{ident}"

    def _assignments(self, request: Request, principal: str, body: Any, kind: str, ident: str = "",
                     warehouse: str = "") -> tuple[int, Any]:
        obj = self._object(request, kind, ident, warehouse)
        if request.method == "GET":
            if not self.allowed(principal, "can_read_assignments", obj):
                raise forbidden_on_object(obj, "can_read_assignments")
            listed: dict[str, Any] = {"assignments": self.assignments(obj)}
            if kind == "project":
                listed["project-id"] = obj.split(":", 1)[1]
            return 200, listed
        self._update(principal, obj, body.get("writes") or [], body.get("deletes") or [])
        return 204, None

    def assignments(self, obj: str) -> list[dict[str, str]]:
        """The grants on ``obj`` as the assignments endpoint lists them."""
        listed = []
        with self._lock:
            for privilege in KINDS[_kind(obj)].grantable:
                for subject in self._tuples.get((obj, privilege), {}):
                    if subject.startswith("role:"):
                        listed.append({"type": privilege, "role": subject[5:].removesuffix("#assignee")})
                    else:
                        listed.append({"type": privilege, "user": subject.removeprefix("user:")})
        return listed

    def _update(self, principal: str, obj: str, writes: list[dict], deletes: list[dict]) -> None:
        """One batch of grants and revocations: refused whole (401) unless the principal may grant
        every privilege in it; failed whole when a write exists (409) or a delete does not (404)."""
        kind = _kind(obj)
        tuples: dict[str, list[tuple[str, str]]] = {"writes": [], "deletes": []}
        for name, assignments in (("writes", writes), ("deletes", deletes)):
            for assignment in assignments:
                privilege = assignment.get("type")
                if privilege not in KINDS[kind].grantable:
                    raise ApiError(400, "InvalidRelation", f"`{privilege}` cannot be granted on a {kind}")
                tuples[name].append((privilege, _subject(assignment)))
        with self._lock:
            for privilege in dict.fromkeys(p for p, _ in tuples["writes"] + tuples["deletes"]):
                action = "can_change_ownership" if privilege == "ownership" else f"can_grant_{privilege}"
                if not self.allowed(principal, action, obj):
                    raise ApiError(401, "Unauthorized", f"Unauthorized for action `{action}` on `{obj}`")
            if any(self.holds(obj, privilege, subject) for privilege, subject in tuples["writes"]):
                raise ApiError(409, "TupleAlreadyExistsError", "Cannot write a tuple which already exists")
            if any(not self.holds(obj, privilege, subject) for privilege, subject in tuples["deletes"]):
                raise ApiError(404, "TupleNotFoundError", "Cannot delete a tuple which does not exist")
            for privilege, subject in tuples["writes"]:
                self.write(obj, privilege, subject)
            for privilege, subject in tuples["deletes"]:
                self.delete(obj, privilege, subject)

    def _authorizer_actions(self, request: Request, principal: str, body: Any, kind: str, ident: str = "",
                            warehouse: str = "") -> tuple[int, Any]:
        obj = self._object(request, kind, ident, warehouse)
        allowed = [action for action in KINDS[kind].listed_actions
                   if self.allowed(principal, action if action.startswith("can_") else f"can_{action}", obj)]
        return 200, {"allowed-actions": allowed}

    def _managed_access(self, request: Request, principal: str, body: Any, kind: str, ident: str) -> tuple[int, Any]:
        obj = self._object(request, kind, ident)
        if request.method == "GET":
            if not self.allowed(principal, "can_get_metadata", obj):
                raise forbidden_on_object(obj, "can_get_metadata")
            with self._lock:
                managed = obj in self._managed
                inherited = managed or self._under_managed_access(obj)
            if kind == "warehouse":
                return 200, {"managed-access": managed}
            return 200, {"managed-access": managed, "managed-access-inherited": inherited}
        if not self.allowed(principal, "can_set_managed_access", obj):
            raise forbidden_on_object(obj, "can_set_managed_access")
        self.set_managed_access(obj, bool(body["managed-access"]))
        return 200, None

    def _create_role(self, request: Request, principal: str, body: Any) -> tuple[int, Any]:
        project = self._object(request, "project", body.get("project-id") or "")
        if not self.allowed(principal, "can_create_role", project):
            raise forbidden_on_object(project, "can_create_role")
        role = Role(str(uuid.uuid4()), body["name"], body.get("description"), project.split(":", 1)[1])
        with self._lock:
            self.roles[role.id] = role
            self.add_child(f"role:{role.id}", project, principal)
        return 201, role.view()

    def _delete_role(self, request: Request, principal: str, body: Any, ident: str) -> tuple[int, Any]:
        obj = f"role:{ident}"
        if ident not in self.roles:
            raise ApiError(404, "RoleNotFound", f"Role with id {ident} not found.")
        if not self.allowed(principal, "can_delete", obj):
            raise forbidden_on_object(obj, "can_delete")
        with self._lock:
            del self.roles[ident]
            self.remove(obj)
        return 204, None


class _Privileges:
    """What one principal holds, worked out for one check (under the authorizer's lock)."""

    def __init__(self, authz: Authorizer, principal: str) -> None:
        self.authz = authz
        self.subjects = authz._acting_as(principal)
        self._held: dict[str, set[str]] = {}

    def meet(self, needs: Needs, obj: str) -> bool:
        """Whether one alternative of ``needs`` is held in full."""
        return any(all(self.has(privilege, obj) for privilege in alternative) for alternative in needs)

    def has(self, privilege: str, obj: str) -> bool:
        """``privilege`` on ``obj``, or ``<kind>.<privilege>`` on the object of that kind ``obj`` is in."""
        kind, _, privilege = privilege.rpartition(".")
        while kind and obj is not None and _kind(obj) != kind:
            obj = self.authz._enclosing(obj)
        if obj is None:
            return False
        return self.visible(obj) if privilege == VISIBLE else privilege in self.held(obj)

    def held(self, obj: str) -> set[str]:
        """Granted on ``obj``, given by what is held on the enclosing object, and what those include;
        an owner manages the grants unless an enclosing namespace or warehouse has managed access."""
        if obj not in self._held:
            kind = KINDS[_kind(obj)]
            privileges = self.authz._granted(obj, self.subjects)
            enclosing = self.authz._enclosing(obj)
            if kind.from_enclosing and enclosing is not None:
                privileges |= {here for there, here in kind.from_enclosing.items() if there in self.held(enclosing)}
            privileges = _with_included(kind, privileges)
            if ("ownership" in privileges and "manage_grants" in kind.grantable
                    and not self.authz._under_managed_access(obj)):
                privileges.add("manage_grants")
            self._held[obj] = privileges
        return self._held[obj]

    def visible(self, obj: str) -> bool:
        """Whether the principal may describe ``obj`` or anything in it."""
        return "describe" in self.held(obj) or any(self.visible(inner) for inner in self.authz._contents(obj))


def _with_included(kind: Kind, privileges: set[str]) -> set[str]:
    """``privileges`` and every privilege they include, on an object of ``kind``."""
    closed, pending = set(privileges), list(privileges)
    while pending:
        for included in kind.includes.get(pending.pop(), ()):
            if included not in closed:
                closed.add(included)
                pending.append(included)
    return closed


_ASSIGNMENT_OBJECTS = [
    ("/server", {"kind": "server"}), ("/project", {"kind": "project"}),
    ("/project/<ident>", {"kind": "project"}), ("/warehouse/<ident>", {"kind": "warehouse"}),
    ("/namespace/<ident>", {"kind": "namespace"}),
    ("/warehouse/<warehouse>/table/<ident>", {"kind": "lakekeeper_table"}),
    ("/warehouse/<warehouse>/generic-table/<ident>", {"kind": "lakekeeper_generic_table"}),
    ("/role/<ident>", {"kind": "role"}),
]
_PERMISSIONS = Map([
    *(Rule(f"/management/v1/permissions{path}/assignments", endpoint="assignments", defaults=kind,
           methods=["GET", "POST"]) for path, kind in _ASSIGNMENT_OBJECTS),
    *(Rule(f"/management/v1/permissions{path}/authorizer-actions", endpoint="authorizer_actions", defaults=kind,
           methods=["GET"]) for path, kind in _ASSIGNMENT_OBJECTS),
    Rule("/management/v1/permissions/warehouse/<ident>/managed-access", endpoint="managed_access",
         defaults={"kind": "warehouse"}, methods=["POST"]),
    Rule("/management/v1/permissions/namespace/<ident>/managed-access", endpoint="managed_access",
         defaults={"kind": "namespace"}, methods=["POST"]),
    Rule("/management/v1/permissions/warehouse/<ident>", endpoint="managed_access", defaults={"kind": "warehouse"},
         methods=["GET"]),
    Rule("/management/v1/permissions/namespace/<ident>", endpoint="managed_access", defaults={"kind": "namespace"},
         methods=["GET"]),
    Rule("/management/v1/role", endpoint="create_role", methods=["POST"]),
    Rule("/management/v1/role/<ident>", endpoint="delete_role", methods=["DELETE"]),
], strict_slashes=False)


# -- refusals and names ---------------------------------------------------------------------------


def forbidden_on_object(obj: str, action: str) -> ApiError:
    """403 for an action on an object the management API names by id, in Lakekeeper's words."""
    kind, _, ident = obj.partition(":")
    word = _WORDS.get(kind, kind)
    return ApiError(403, f"{word.title().replace(' ', '')}ActionForbidden",
                    f"{word.capitalize()} action `{action}` forbidden on {word} `{ident}`")


_WORDS = {"lakekeeper_table": "table", "lakekeeper_generic_table": "generic table"}


def _kind(obj: str) -> str:
    return obj.split(":", 1)[0]


def _user(principal: str) -> str:
    return f"user:{principal}"


def _subject(assignment: dict) -> str:
    """The OpenFGA user an assignment names: user:<principal> or role:<id>#assignee."""
    if "role" in assignment:
        return f"role:{assignment['role']}#assignee"
    return f"user:{assignment['user']}"


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
