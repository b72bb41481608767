"""Bootstrap a Lakekeeper for lakeflow: as its admin, create the warehouse and the namespaces; with
one principal per job (STACK_INGEST_CLIENT_*, STACK_COMPACT_CLIENT_*), grant each job exactly what
it needs.

Idempotent: a server already bootstrapped (by the configured admin: checked when the server has
authorization), a warehouse of the same name (looked up, not recreated), existing namespaces (409)
and grants (read first, only the missing ones written) are all fine, so it runs on every ``make
stack``. Configured by ``STACK_*`` variables (the environment over ``deploy/stack.env``, the local
stack's development defaults); works against any Lakekeeper.
"""

from __future__ import annotations

from lakeflow.stack.bootstrap import BootstrapResult, NotServerAdmin, bootstrap_stack, check_admin
from lakeflow.stack.config import DEFAULT_STACK_ENV, JobClient, StackConfig, load_stack_config
from lakeflow.stack.envfiles import env_lines, shown, write_env, write_job_envs
from lakeflow.stack.grants import (
    Grant,
    JobPrincipals,
    ensure_grants,
    grant_on_namespaces,
    grant_on_tables,
    identify_jobs,
    missing,
)
from lakeflow.stack.server import LakekeeperAdmin, open_session, wait_healthy

__all__ = [
    "DEFAULT_STACK_ENV",
    "BootstrapResult",
    "Grant",
    "JobClient",
    "JobPrincipals",
    "LakekeeperAdmin",
    "NotServerAdmin",
    "StackConfig",
    "bootstrap_stack",
    "check_admin",
    "ensure_grants",
    "env_lines",
    "grant_on_namespaces",
    "grant_on_tables",
    "identify_jobs",
    "load_stack_config",
    "missing",
    "open_session",
    "shown",
    "wait_healthy",
    "write_env",
    "write_job_envs",
]
