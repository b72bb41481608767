"""The stand-ins' authorization model (tests/standins/authz.py :data:`KINDS`): that it is consistent,
and what it answers where the recording does not reach: ownership and namespace ``create``, roles of
roles, managed access inherited from a parent namespace, a server admin without data access, a grant
batch that fails whole. The recorded behaviour itself is replayed by
tests/integration/test_lakekeeper_authz_replay.py."""

from __future__ import annotations

import json

import pytest
from werkzeug.test import Client

from tests.standins.authz import KINDS, VISIBLE, Authorizer
from tests.standins.lakekeeper import namespace_object, table_object, warehouse_object
from tests.standins.management import ManagementStandin

ADMIN, OWNER, READER = "oidc~admin", "oidc~owner", "oidc~reader"


@pytest.fixture
def authz() -> Authorizer:
    """Bootstrapped by admin: warehouse W (admin's) → namespace A (admin's) → namespace B → table T (owner's)."""
    authz = Authorizer(lambda token: token)  # a token is its subject
    authz.bootstrap(ADMIN)
    authz.add_warehouse("W", owner=ADMIN)
    authz.add_child(namespace_object("A"), warehouse_object("W"), owner=ADMIN)
    authz.add_child(namespace_object("B"), namespace_object("A"))
    authz.add_child(table_object("W", "T", generic=True), namespace_object("B"), owner=OWNER)
    return authz


def test_every_privilege_the_model_names_can_be_granted_where_it_is_named() -> None:
    def known(kind: str, privilege: str) -> bool:
        return privilege == VISIBLE or privilege in KINDS[kind].grantable

    for name, kind in KINDS.items():
        assert all(outer in KINDS for outer in kind.inside), name
        for privilege, given in kind.includes.items():
            assert all(known(name, p) for p in (privilege, *given)), f"{name} includes {privilege}"
        for there, here in kind.from_enclosing.items():
            assert known(name, here) and any(known(outer, there) for outer in kind.inside), f"{name} {there}"
        for action, needs in kind.actions.items():
            for reference in (p for alternative in needs for p in alternative):
                where, _, privilege = reference.rpartition(".")
                assert known(where or name, privilege), f"{name}.{action} needs {reference}"
        for listed in kind.listed_actions:
            assert (listed if listed.startswith("can_") else f"can_{listed}") in kind.actions, f"{name} lists {listed}"


def test_ownership_includes_every_data_privilege_and_namespace_create_describes_its_tables(
        authz: Authorizer) -> None:
    gt = table_object("W", "T", generic=True)
    assert authz.storage_access(OWNER, gt) == "write"
    assert authz.allowed(OWNER, "can_rename", gt) and authz.allowed(OWNER, "can_grant_modify", gt)
    authz.grant(READER, "create", namespace_object("A"))
    assert authz.allowed(READER, "can_get_metadata", gt) and authz.storage_access(READER, gt) is None
    assert authz.allowed(READER, "can_create_generic_table", namespace_object("B")), "create is inherited"
    assert not authz.allowed(READER, "can_create_namespace", warehouse_object("W"))


def test_a_grant_to_a_role_holds_for_the_members_of_its_member_roles(authz: Authorizer) -> None:
    gt = table_object("W", "T", generic=True)
    authz.write("role:outer", "assignee", "role:inner#assignee")
    authz.write("role:inner", "assignee", f"user:{READER}")
    authz.write(gt, "select", "role:outer#assignee")
    assert authz.storage_access(READER, gt) == "read"
    assert authz.allowed(READER, "can_get_metadata", namespace_object("A")), "visible upwards, through B"
    authz.delete("role:inner", "assignee", f"user:{READER}")
    assert not authz.allowed(READER, "can_get_metadata", gt)


def test_managed_access_on_a_parent_namespace_stops_an_owner_below_from_passing_grants(authz: Authorizer) -> None:
    gt = table_object("W", "T", generic=True)
    assert authz.allowed(OWNER, "can_grant_select", gt)
    authz.set_managed_access(namespace_object("A"), True)
    assert not authz.allowed(OWNER, "can_grant_select", gt)
    assert authz.storage_access(OWNER, gt) == "write", "managed access takes grants, not data"
    assert authz.allowed(ADMIN, "can_grant_select", gt), "the managed namespace's owner still grants"


def test_a_server_admin_administers_but_sees_no_data_without_a_grant() -> None:
    authz = Authorizer(lambda token: token)
    authz.bootstrap(ADMIN)
    authz.add_warehouse("W", owner="oidc~someone")
    authz.delete(authz.project, "project_admin", f"user:{ADMIN}")
    assert authz.allowed(ADMIN, "can_list_users", authz.server)
    assert authz.allowed(ADMIN, "can_list_warehouses", authz.project)
    assert not authz.allowed(ADMIN, "can_get_metadata", warehouse_object("W"))


def test_a_grant_batch_with_one_existing_tuple_changes_nothing(authz: Authorizer) -> None:
    management = ManagementStandin(authz=authz)
    client = Client(management)
    path = f"/management/v1/permissions/namespace/{namespace_object('B').split(':')[1]}/assignments"
    batch = {"writes": [{"type": "select", "user": READER}, {"type": "ownership", "user": OWNER}]}
    authz.grant(OWNER, "ownership", namespace_object("B"))
    answer = client.post(path, json=batch, headers={"Authorization": f"Bearer {ADMIN.split('~')[1]}"})
    assert (answer.status_code, answer.json["error"]["type"]) == (409, "TupleAlreadyExistsError")
    assert not authz.holds(namespace_object("B"), "select", f"user:{READER}")

    refused = client.post(path, json={"writes": [{"type": "select", "user": READER}]},
                          headers={"Authorization": "Bearer reader"})
    assert (refused.status_code, refused.json["error"]["message"]) == (
        401, f"Unauthorized for action `can_grant_select` on `{namespace_object('B')}`")
    granted = client.post(path, json={"writes": [{"type": "select", "user": READER}]},
                          headers={"Authorization": "Bearer owner"})
    assert granted.status_code == 204 and authz.storage_access(READER, table_object("W", "T", generic=True)) == "read"
    listed = client.get(path, headers={"Authorization": "Bearer owner"})
    assert json.loads(listed.data)["assignments"] == [{"type": "ownership", "user": OWNER},
                                                      {"type": "select", "user": READER}]
    assert not management.violations
