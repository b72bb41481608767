"""``lakeflow stack bootstrap``: set up a Lakekeeper for lakeflow (:mod:`lakeflow.stack`) and print
the ``.env.local`` lines that point lakeflow at it."""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from lakeflow import stack as stack_module
from lakeflow.stack import DEFAULT_STACK_ENV

if TYPE_CHECKING:
    from lakeflow.streams import Pipeline


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
        help="bootstrap Lakekeeper, create the warehouse and namespace (idempotent)",
        description="Wait for Lakekeeper's /health, accept the terms of use (once), create the "
        "warehouse STACK_WAREHOUSE unless it exists, create NAMESPACE parents first, "
        "then print the .env.local lines that point lakeflow at it.",
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
    boot.add_argument(
        "--write-env",
        type=Path,
        metavar="PATH",
        help="also set the printed entries in this dotenv file, e.g. .env.local "
        "(secrets are written there, never printed)",
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
        wait_healthy,
        write_env,
    )

    env_file = args.env_file if args.env_file.is_file() else None
    if env_file is None and args.env_file != DEFAULT_STACK_ENV:
        raise SettingsError(f"--env-file {args.env_file}: no such file")
    config = load_stack_config(os.environ, env_file)
    pipeline = _pipeline()
    wait_healthy(config.lakekeeper, args.wait, print)
    print(f"Lakekeeper at {config.lakekeeper} is healthy")
    namespaces = [d.namespace for d in pipeline.declared] if pipeline else []
    with open_session(config) as session:
        result = bootstrap_stack(LakekeeperAdmin(config.lakekeeper, session), config, print, namespaces)
    lines = env_lines(config, result)
    if pipeline:
        _register_streams(lines)
    print(f"\nWAREHOUSE_ID={result.warehouse_id}\n\nlakeflow settings for this Lakekeeper (.env.local):")
    for key, value in lines.items():
        if value:  # an empty TOKEN= only clears a static token when written
            print(f"{key}={'***' if key == 'OAUTH_CLIENT_SECRET' else value}")
    if args.write_env:
        write_env(args.write_env, lines)
        print(f"\nwritten to {args.write_env}")
    elif "OAUTH_CLIENT_SECRET" in lines:
        print(
            "\n(OAUTH_CLIENT_SECRET is STACK_OAUTH_CLIENT_SECRET; "
            "`lakeflow stack bootstrap --write-env .env.local` writes all of them)"
        )
    return 0


def _pipeline() -> Pipeline | None:
    """The pipeline file's streams (PIPELINE), whose namespaces and tables the bootstrap creates; None without one."""
    from lakeflow.settings import load_settings
    from lakeflow.streams import load_pipeline

    settings = load_settings(local=True)  # the file and its schemas are checked before anything is created
    return load_pipeline(settings) if settings.pipeline is not None else None


def _register_streams(lines: Mapping[str, str]) -> None:
    """Register every stream's raw table (idempotent) in the bootstrapped warehouse (a topic pattern's
    tables: by the ingestion job, as their topics are found)."""
    from lakeflow.catalog import open_catalog
    from lakeflow.settings import load_settings
    from lakeflow.streams import load_pipeline

    settings = load_settings({**os.environ, **{k: v for k, v in lines.items() if v}}, env_file=Path(os.devnull))
    with open_catalog(settings) as catalog:
        for stream in load_pipeline(settings).streams():
            handle = catalog.register(stream.namespace, stream.table)
            print(f"table {stream.raw_name} (stream {stream.name}): {'created' if handle.created else 'exists'}")
