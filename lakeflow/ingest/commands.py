"""``lakeflow ingest plugins | cluster-up``: what the ingestion job needs around it.

The job itself runs from ``jobs/sensor_ingest.py`` (``make run``, or ``flink run -py``).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``lakeflow ingest …`` to the ``lakeflow`` parser."""
    ingest = subparsers.add_parser("ingest", help="Flink ingestion: S3 plugin, a cluster holding the table's storage settings")
    sub = ingest.add_subparsers(dest="ingest_command", metavar="ACTION", required=True)

    p = sub.add_parser("plugins", help="install flink-s3-fs-hadoop into the wheel's Flink plugins/",
                       description="Copy flink-s3-fs-hadoop from $FLINK_HOME/opt (a Flink distribution "
                                   "of the same version), else download it from Maven Central.")
    p.add_argument("--flink-home", type=Path, default=os.environ.get("FLINK_HOME") or None,
                   help="a Flink distribution to copy the plugin from (default $FLINK_HOME)")
    p.set_defaults(handler=_plugins)

    p = sub.add_parser("cluster-up", help="start a standalone Flink cluster whose TaskManagers can write the table",
                       description="Start the local standalone cluster (as `make cluster-up`) able to write the "
                                   "table. For an S3 table: write the table's AWS profile (as `lakeflow "
                                   "aws-profile`; files 0600), put the keyless fs.s3a.* settings that select "
                                   "S3A's profile credentials provider into config.yaml, and start the "
                                   "processes with AWS_PROFILE, AWS_SHARED_CREDENTIALS_FILE and "
                                   "AWS_CREDENTIAL_PROFILES_FILE: the AWS SDK re-vends from Lakekeeper before "
                                   "the credentials expire. No key goes into config.yaml. A file:// table "
                                   "needs none of this.")
    p.add_argument("--local", action="store_true", help="use the embedded local catalog")
    p.add_argument("--home", type=Path, default=None,
                   help="private directory for conf/, log/, pid/ (default $LAKEFLOW_HOME/cluster)")
    p.add_argument("--profile-dir", type=Path, default=None, metavar="DIR",
                   help="where to write the table's AWS profile (default $LAKEFLOW_HOME/aws)")
    p.add_argument("--rest-port", type=int, default=int(os.environ.get("FLINK_REST_PORT", "8081")))
    p.add_argument("--rpc-port", type=int, default=int(os.environ.get("FLINK_RPC_PORT", "6123")))
    p.set_defaults(handler=_cluster_up)


def _plugins(args: argparse.Namespace) -> int:
    from lakeflow.ingest import IngestError
    from lakeflow.ingest.plugins import install_s3_plugin

    try:
        print(install_s3_plugin(args.flink_home))
    except IngestError as exc:
        print(f"lakeflow ingest plugins: {exc}", file=sys.stderr)
        return 2
    return 0


def _cluster_up(args: argparse.Namespace) -> int:
    from lakeflow.aws_profile import ProfileError, renewal_note
    from lakeflow.flink_cluster import FlinkCluster
    from lakeflow.ingest import IngestError
    from lakeflow.ingest.storage import cluster_storage
    from lakeflow.settings import load_settings

    settings = load_settings(local=args.local or None)
    try:
        storage = cluster_storage(settings, args.profile_dir or settings.home / "aws")
    except (IngestError, ProfileError) as exc:
        print(f"lakeflow ingest cluster-up: {exc}", file=sys.stderr)
        return 2
    cluster = FlinkCluster(args.home or settings.home / "cluster", rest_port=args.rest_port,
                           rpc_port=args.rpc_port, conf=storage.conf, env=storage.env())
    if cluster.running():
        print(f"a cluster is already running in {cluster.home}: stop it first (make cluster-down)", file=sys.stderr)
        return 2
    profile = storage.profile
    if profile:
        print(f"lakeflow ingest cluster-up: wrote AWS profile {profile.name} to {profile.credentials_file} "
              f"(catalog settings in {profile.env_file}, mode 0600)", file=sys.stderr)
        note = renewal_note(settings)
        if note:
            print(f"lakeflow ingest cluster-up: {note}", file=sys.stderr)
    cluster.start()
    via = f", credentials through AWS profile {profile.name}" if profile else ""
    print(f"Flink cluster up: {cluster.rest_url} (FLINK_CONF_DIR={cluster.conf_dir}; "
          f"{len(storage.conf)} fs.s3a.* settings for {storage.handle.location}{via})")
    return 0
