"""``lakeflow aws-profile``: write the AWS profile that re-vends the table's credentials
(:mod:`lakeflow.aws_profile`) and print the settings that select it."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from lakeflow.aws_profile import PROVIDERS


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``lakeflow aws-profile`` to the ``lakeflow`` parser."""
    p = subparsers.add_parser(
        "aws-profile",
        help="write an AWS profile that re-vends the table's credentials (long-running jobs)",
        description="Write an AWS profile whose credential_process runs `lakeflow credential-process` "
        "(files 0600 under --dir), and print the keyless S3A settings that select S3A's "
        "profile credentials provider plus the environment every TaskManager / executor "
        "needs. The AWS SDK then re-vends from Lakekeeper before the credentials expire.",
    )
    p.add_argument("--namespace", metavar="NS", help="namespace, levels separated by '.' (default: $NAMESPACE)")
    p.add_argument("--table", metavar="NAME", help="table name (default: $TABLE)")
    p.add_argument(
        "--dir", type=Path, metavar="DIR", help="where to write the profile files (default: $LAKEFLOW_HOME/aws)"
    )
    p.add_argument(
        "--format",
        choices=("flink", "spark", "env"),
        default="flink",
        help="print Flink configuration, Spark conf, or only the environment (default flink)",
    )
    p.add_argument(
        "--sdk",
        choices=tuple(PROVIDERS),
        default="v1",
        help="S3A's AWS SDK: v1 for Hadoop 3.3.x (flink-s3-fs-hadoop), v2 for Hadoop 3.4+ "
        "(default v1: Hadoop 3.4+ maps the v1 class name to v2)",
    )
    p.set_defaults(handler=_aws_profile)


def _aws_profile(args: argparse.Namespace) -> int:
    from lakeflow.aws_profile import (
        ProfileError,
        catalog_settings,
        engine_settings,
        refreshing,
        renewal_note,
        write_profile,
    )
    from lakeflow.catalog import open_catalog
    from lakeflow.credentials import show
    from lakeflow.settings import load_settings

    env = dict(os.environ)
    env.update({k: v for k, v in (("NAMESPACE", args.namespace), ("TABLE", args.table)) if v})
    settings = load_settings(env)
    if settings.catalog != "lakekeeper":
        print(
            "lakeflow aws-profile: the embedded local catalog vends no credentials; set LAKEKEEPER "
            "and WAREHOUSE_ID (docs/operations.md)",
            file=sys.stderr,
        )
        return 2
    with open_catalog(settings) as catalog:
        handle = catalog.load(settings.namespace, settings.table)
    note = renewal_note(settings)
    if note:
        print(f"lakeflow aws-profile: {note}", file=sys.stderr)
    try:
        profile = write_profile(
            args.dir or settings.home / "aws",
            settings.namespace,
            settings.table,
            catalog_settings(settings, handle.ident.warehouse),
        )
    except ProfileError as exc:
        print(f"lakeflow aws-profile: {exc}", file=sys.stderr)
        return 2
    s3a = refreshing(handle.s3a(settings.s3_endpoint), args.sdk)
    print(
        f"wrote AWS profile {profile.name} to {profile.credentials_file} (catalog settings in "
        f"{profile.env_file}, mode 0600)",
        file=sys.stderr,
    )
    for line in show(engine_settings(s3a, profile, args.format)):
        print(line)
    return 0
