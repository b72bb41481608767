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
                       description="Start the local standalone cluster (as `make cluster-up`) with the table's "
                                   "fs.s3a.* settings, vended credentials included, in its config.yaml (mode "
                                   "0600): Flink's S3 filesystem reads them when a TaskManager starts, never "
                                   "from a job. Vended credentials expire: restart the cluster to renew them.")
    p.add_argument("--local", action="store_true", help="use the embedded local catalog")
    p.add_argument("--home", type=Path, default=None,
                   help="private directory for conf/, log/, pid/ (default $LAKEFLOW_HOME/cluster)")
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
    from lakeflow.flink_cluster import FlinkCluster
    from lakeflow.ingest import IngestError
    from lakeflow.ingest.storage import cluster_storage
    from lakeflow.settings import load_settings

    settings = load_settings(local=args.local or None)
    try:
        handle, conf = cluster_storage(settings)
    except IngestError as exc:
        print(f"lakeflow ingest cluster-up: {exc}", file=sys.stderr)
        return 2
    cluster = FlinkCluster(args.home or settings.home / "cluster", rest_port=args.rest_port,
                           rpc_port=args.rpc_port, conf=conf)
    if cluster.running():
        print(f"a cluster is already running in {cluster.home}: stop it first (make cluster-down)", file=sys.stderr)
        return 2
    cluster.start()
    expiry = f", credentials expire {handle.expires_at:%Y-%m-%d %H:%M %Z}" if handle.expires_at else ""
    print(f"Flink cluster up: {cluster.rest_url} (FLINK_CONF_DIR={cluster.conf_dir}; "
          f"{len(conf)} fs.s3a.* settings for {handle.location}{expiry})")
    return 0
