"""``lakeflow stack bootstrap``: set up a Lakekeeper for lakeflow (:mod:`lakeflow.stack`) and print
the ``.env.local`` lines that point lakeflow at it (one file per job with one principal per job)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from lakeflow import stack as stack_module
from lakeflow.stack import DEFAULT_STACK_ENV

if TYPE_CHECKING:
    from lakeflow.settings import Settings
    from lakeflow.stack import BootstrapResult, LakekeeperAdmin, StackConfig
    from lakeflow.streams import Pipeline

Table = tuple[tuple[str, ...], str]


def register(subparsers: argparse._SubParsersAction) -> None:
    """``lakeflow stack bootstrap``."""
    stack = subparsers.add_parser(
        "stack",
        help="set up a Lakekeeper for lakeflow (local Docker stack or any server)",
        description=stack_module.__doc__,
    )
    sub = stack.add_subparsers(dest="stack_command", metavar="COMMAND", required=True)
    boot = sub.add_parser(
        "bootstrap",
        help="bootstrap Lakekeeper as its admin, create the warehouse and namespaces, grant each job its "
        "privileges (idempotent)",
        description="Wait for Lakekeeper's /health; bootstrap it as the admin (STACK_OAUTH_*) when new, else "
        "check that client is its admin (with authorization), refusing otherwise; create the warehouse "
        "STACK_WAREHOUSE unless it exists and the namespaces, parents first; register a PIPELINE's raw tables. "
        "With STACK_INGEST_CLIENT_* and STACK_COMPACT_CLIENT_*: register every stream's raw table (PIPELINE's, "
        "or the one TABLE) as the ingestion and grant each job exactly what it needs "
        "(docs/lakekeeper.md#least-privilege). Then print the .env.local lines (one set per job with job "
        "principals).",
    )
    boot.add_argument(
        "--env-file",
        type=Path,
        default=DEFAULT_STACK_ENV,
        help="STACK_* defaults (the environment wins; default %(default)s)",
    )
    boot.add_argument(
        "--wait",
        type=float,
        default=180.0,
        metavar="SECONDS",
        help="how long to wait for Lakekeeper's /health (default %(default)s)",
    )
    written = boot.add_mutually_exclusive_group()
    written.add_argument(
        "--write-env",
        type=Path,
        metavar="PATH",
        help="without job principals: also set the printed entries in this dotenv file, e.g. .env.local "
        "(secrets are written there, never printed)",
    )
    written.add_argument(
        "--write-env-dir",
        type=Path,
        metavar="DIR",
        help="with job principals: set each job's entries in ingest.env and compact.env in DIR (0600, other "
        "lines kept), each with its own client; run a job with LAKEFLOW_ENV_FILE pointing at its file",
    )
    boot.set_defaults(handler=_bootstrap_command)


def _bootstrap_command(args: argparse.Namespace) -> int:
    from lakeflow.settings import SettingsError
    from lakeflow.stack import (
        LakekeeperAdmin,
        bootstrap_stack,
        env_lines,
        load_stack_config,
        open_session,
        shown,
        wait_healthy,
        write_env,
        write_job_envs,
    )

    env_file = args.env_file if args.env_file.is_file() else None
    if env_file is None and args.env_file != DEFAULT_STACK_ENV:
        raise SettingsError(f"--env-file {args.env_file}: no such file")
    config = load_stack_config(os.environ, env_file)
    _check_outputs(args, config)
    pipeline = _pipeline()
    wait_healthy(config.lakekeeper, args.wait, print)
    print(f"Lakekeeper at {config.lakekeeper} is healthy")
    namespaces = [d.namespace for d in pipeline.declared] if pipeline else []
    with open_session(config) as session:
        admin = LakekeeperAdmin(config.lakekeeper, session)
        result = bootstrap_stack(admin, config, print, namespaces)
        if config.jobs:
            per_job = _least_privilege(admin, config, result)
    print(f"\nWAREHOUSE_ID={result.warehouse_id}")
    if config.jobs:
        for job in config.jobs:
            print(f"\nlakeflow settings of the {job.title} job (its own client {job.client_id}):")
            print("\n".join(shown(per_job[job.job])))
        if args.write_env_dir:
            paths = write_job_envs(args.write_env_dir, per_job)
            print(f"\nwritten to {', '.join(map(str, paths))}: run each job with LAKEFLOW_ENV_FILE=<its file>")
        else:
            print("\n(`lakeflow stack bootstrap --write-env-dir DIR` writes ingest.env and compact.env in DIR)")
        return 0
    lines = env_lines(config, result)
    if pipeline:
        _register_streams(_settings(lines))
    print("\nlakeflow settings for this Lakekeeper (.env.local):")
    print("\n".join(shown(lines)))
    if args.write_env:
        write_env(args.write_env, lines)
        print(f"\nwritten to {args.write_env}")
    elif "OAUTH_CLIENT_SECRET" in lines:
        print(
            "\n(OAUTH_CLIENT_SECRET is STACK_OAUTH_CLIENT_SECRET; "
            "`lakeflow stack bootstrap --write-env .env.local` writes all of them)"
        )
    return 0


def _check_outputs(args: argparse.Namespace, config: StackConfig) -> None:
    """The file flag that fits the configuration: one file without job principals, one per job with
    them (the admin's client is then written nowhere)."""
    from lakeflow.settings import SettingsError

    if config.jobs and args.write_env:
        raise SettingsError(
            f"--write-env {args.write_env}: with STACK_INGEST_CLIENT_* and STACK_COMPACT_CLIENT_* each job gets "
            "its own file: --write-env-dir DIR (the admin's client is written nowhere)"
        )
    if not config.jobs and args.write_env_dir:
        raise SettingsError(
            f"--write-env-dir {args.write_env_dir}: needs STACK_INGEST_CLIENT_* and STACK_COMPACT_CLIENT_* "
            "(one principal per job); without them --write-env PATH writes the one file"
        )


def _pipeline() -> Pipeline | None:
    """The pipeline file's streams (PIPELINE), whose namespaces and tables the bootstrap creates; None without one."""
    from lakeflow.settings import load_settings
    from lakeflow.streams import load_pipeline

    settings = load_settings(local=True)  # the file and its schemas are checked before anything is created
    return load_pipeline(settings) if settings.pipeline is not None else None


def _settings(lines: Mapping[str, str]) -> Settings:
    """lakeflow's settings with ``lines`` (the catalog and a client) over the environment and .env.local."""
    from lakeflow.settings import load_settings

    return load_settings(overrides=lines)


def _least_privilege(admin: LakekeeperAdmin, config: StackConfig, result: BootstrapResult) -> dict[str, dict[str, str]]:
    """Each job's principal, its grants, the raw tables registered as the ingestion (their owner);
    each job's .env lines."""
    from lakeflow.stack import env_lines, grant_on_namespaces, grant_on_tables, identify_jobs
    from lakeflow.streams import load_pipeline

    per_job = {job.job: env_lines(config, result, job) for job in config.jobs}
    settings = _settings(per_job["ingest"])
    pipeline = load_pipeline(settings)  # PIPELINE's streams, or the one TABLE
    if not result.authorization:
        print("authorization: allow-all (every principal may do everything): no grants to make")
        _register_streams(settings, pipeline)
        return per_job
    principals = identify_jobs(config, result.admin, print)
    namespaces = [d.namespace for d in pipeline.declared]
    grant_on_namespaces(admin, result.warehouse_id, namespaces, principals, print, managed_access=config.managed_access)
    tables = _register_streams(settings, pipeline)
    grant_on_tables(admin, result.warehouse_id, tables, principals, print)
    return per_job


def _register_streams(settings: Settings, pipeline: Pipeline | None = None) -> list[Table]:
    """Register every fixed stream's raw table (idempotent) with the client of ``settings``; the raw
    tables of ``pipeline`` (default: the settings'): those, and a topic pattern's found in its namespace
    (the ingestion registers them as their topics appear)."""
    from lakeflow.catalog import open_catalog
    from lakeflow.streams import load_pipeline

    pipeline = pipeline or load_pipeline(settings)
    tables: list[Table] = []
    with open_catalog(settings) as catalog:
        for stream in pipeline.streams():
            handle = catalog.register(stream.namespace, stream.table)
            print(f"table {stream.raw_name} (stream {stream.name}): {'created' if handle.created else 'exists'}")
            tables.append((stream.namespace, stream.table))
        for levels in dict.fromkeys(d.namespace for d in pipeline.patterns):
            names = [t.name for t in catalog.list_tables(levels)]
            for stream in pipeline.streams_of_tables(names):
                if stream.namespace == levels and (stream.namespace, stream.table) not in tables:
                    print(f"table {stream.raw_name} (stream {stream.declared}'s topic pattern): exists")
                    tables.append((stream.namespace, stream.table))
    return tables
