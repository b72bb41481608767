"""One principal per job, granted exactly what it needs (docs/lakekeeper.md#least-privilege).

- ingestion: ``create`` on each stream's namespace (it registers, so owns, its raw tables; a topic
  pattern's appear at run time), and ``modify`` on a raw table it does not own (one an admin registered);
- compaction: ``create`` on each stream's namespace (its Iceberg tables, on the first run) and
  ``select`` on each raw table;
- anything else (the harvest): nothing.

Grants are not idempotent on the server (an existing tuple: 409 ``TupleAlreadyExistsError``, and the
whole batch fails): each object's assignments are read first and only the missing tuples written.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import quote

from lakeflow.catalog.errors import CatalogError
from lakeflow.stack.config import StackConfig
from lakeflow.stack.server import Assignment, LakekeeperAdmin, Report, open_session

# The relations that hold a needed one (Lakekeeper's documented grants: ownership holds every
# privilege, modify holds select).
HOLDING = {
    "create": ("create", "ownership"),
    "select": ("select", "modify", "ownership"),
    "modify": ("modify", "ownership"),
}


@dataclass(frozen=True)
class Grant:
    """A relation one job's principal needs on one object."""

    relation: str  # create, select or modify
    user: str  # the principal id, e.g. oidc~<sub>
    job: str  # ingestion or compaction

    def tuple(self) -> dict[str, str]:
        """The tuple as ``POST …/assignments`` writes it."""
        return {"type": self.relation, "user": self.user}


@dataclass(frozen=True)
class JobPrincipals:
    """The principal id each job runs as."""

    ingest: str
    compact: str


def held(grant: Grant, assignments: Iterable[Assignment]) -> str | None:
    """The relation of ``assignments`` that holds ``grant`` (None: it is missing)."""
    have = {a.type for a in assignments if a.user == grant.user}
    return next((r for r in HOLDING[grant.relation] if r in have), None)


def missing(wanted: Sequence[Grant], assignments: Sequence[Assignment]) -> list[Grant]:
    """The grants of ``wanted`` that no tuple of ``assignments`` holds, each once."""
    return [g for g in dict.fromkeys(wanted) if held(g, assignments) is None]


def identify_jobs(config: StackConfig, admin_id: str | None, report: Report) -> JobPrincipals:
    """Log in as each job once (``GET /catalog/v1/config`` makes it a user) and read its principal id
    (``GET /management/v1/whoami``): whatever the IdP puts in ``sub`` (a Keycloak service account's
    is a UUID, not the client id)."""
    found: dict[str, str] = {}
    for job in config.jobs:
        with open_session(config, job) as session:
            client = LakekeeperAdmin(config.lakekeeper, session)
            client.log_in(config.warehouse)
            me = client.whoami()
        if me is None:
            raise CatalogError(f"{job.title} client {job.client_id}: still no user after logging in (whoami: 404)")
        report(f"{job.title}: client {job.client_id} is principal {me}")
        found[job.job] = me
    principals = JobPrincipals(found["ingest"], found["compact"])
    seen: dict[str, str] = {}
    for name, principal in (
        ("the ingestion", principals.ingest),
        ("the compaction", principals.compact),
        ("the admin", admin_id),
    ):
        if principal is not None and principal in seen:
            raise CatalogError(f"{seen[principal]} and {name} are one principal ({principal}): each job needs its own")
        if principal is not None:
            seen[principal] = name
    return principals


def grant_on_namespaces(
    admin: LakekeeperAdmin,
    warehouse_id: str,
    namespaces: Iterable[tuple[str, ...]],
    principals: JobPrincipals,
    report: Report,
    *,
    managed_access: bool = False,
) -> None:
    """``create`` on each namespace for both jobs (and managed access on it when asked)."""
    for levels in dict.fromkeys(namespaces):
        namespace_id = admin.namespace_id(warehouse_id, levels)
        what = f"namespace {'.'.join(levels)}"
        path = f"/management/v1/permissions/namespace/{quote(namespace_id, safe='')}/assignments"
        wanted = [Grant("create", principals.ingest, "ingestion"), Grant("create", principals.compact, "compaction")]
        ensure_grants(admin, path, what, wanted, report)
        if managed_access:
            admin.set_managed_access(namespace_id, what)
            report(f"{what}: managed access on")


def grant_on_tables(
    admin: LakekeeperAdmin,
    warehouse_id: str,
    tables: Iterable[tuple[tuple[str, ...], str]],
    principals: JobPrincipals,
    report: Report,
) -> None:
    """On each raw (generic) table: ``modify`` for the ingestion unless it owns it, ``select`` for
    the compaction."""
    ids: dict[tuple[str, ...], Mapping[str, str]] = {}
    for levels, table in dict.fromkeys(tables):
        if levels not in ids:
            ids[levels] = admin.generic_tables(warehouse_id, levels)
        what = f"table {'.'.join((*levels, table))}"
        table_id = ids[levels].get(table)
        if table_id is None:
            raise CatalogError(f"{what}: not registered (run lakeflow stack bootstrap again)")
        path = (
            f"/management/v1/permissions/warehouse/{quote(warehouse_id, safe='')}"
            f"/generic-table/{quote(table_id, safe='')}/assignments"
        )
        wanted = [Grant("modify", principals.ingest, "ingestion"), Grant("select", principals.compact, "compaction")]
        ensure_grants(admin, path, what, wanted, report)


def ensure_grants(admin: LakekeeperAdmin, path: str, what: str, wanted: Sequence[Grant], report: Report) -> None:
    """Write the grants of ``wanted`` that ``path``'s assignments lack, in one batch; report each one
    made or found. A batch another run beat (409 ``TupleAlreadyExistsError``) is planned once more."""
    have = admin.assignments(path, what)
    todo = missing(wanted, have)
    if todo:
        try:
            admin.write_assignments(path, [g.tuple() for g in todo], what)
        except CatalogError as exc:
            if exc.type != "TupleAlreadyExistsError":
                raise
            have = admin.assignments(path, what)
            todo = missing(todo, have)
            if todo:
                admin.write_assignments(path, [g.tuple() for g in todo], what)
    for grant in wanted:
        relation = held(grant, have)  # None: written by this call
        if relation is None:
            report(f"grant {grant.relation} on {what} to the {grant.job} {grant.user}: made")
        else:
            extra = "" if relation == grant.relation else f" (it holds {relation})"
            report(f"grant {grant.relation} on {what} to the {grant.job} {grant.user}: found{extra}")
