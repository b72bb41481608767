"""``lakeflow flink up | down | status``: the local standalone Flink cluster the ingestion job runs on.

``up`` starts the wheel's Flink (:mod:`lakeflow.runtime.flink_cluster`) able to write the table: for an S3
table it writes the table's AWS profile and puts keyless ``fs.s3a.*`` settings into its config.yaml
(:func:`lakeflow.ingest.storage.cluster_storage`); it reports every job's lineage natively
(lakeflow's ``JobStatusChangedListener``, into the lineage store) unless ``--no-native-lineage``;
with ``--sql-gateway-port`` it also starts Flink's SQL Gateway; with ``--metrics-port`` Flink's
Prometheus reporter serves every process's metrics, the job's own included (docs/operations.md). The job itself runs from
``jobs/sensor_ingest.py`` (``make run``, or the ``flink run`` that ``make package`` prints).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from urllib.parse import urlsplit


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``lakeflow flink …`` to the ``lakeflow`` parser."""
    flink = subparsers.add_parser("flink", help="the local standalone Flink cluster (make cluster-up / cluster-down)")
    sub = flink.add_subparsers(dest="flink_command", metavar="ACTION", required=True)

    up = sub.add_parser(
        "up",
        help="start a standalone Flink cluster whose TaskManagers can write the table",
        description="Start the local standalone cluster (as `make cluster-up`) able to write the "
        "table. For an S3 table: write the table's AWS profile (as `lakeflow "
        "aws-profile`; files 0600), put the keyless fs.s3a.* settings that select "
        "S3A's profile credentials provider into config.yaml, and start the "
        "processes with AWS_PROFILE, AWS_SHARED_CREDENTIALS_FILE and "
        "AWS_CREDENTIAL_PROFILES_FILE: the AWS SDK re-vends from Lakekeeper before "
        "the credentials expire. No key goes into config.yaml. A file:// table "
        "needs none of this. Every job's lineage is written to the lineage store "
        "by Flink itself (docs/harvest.md, 'Native Flink lineage').",
    )
    up.add_argument("--local", action="store_true", help="use the embedded local catalog")
    up.add_argument(
        "--profile-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="where to write the catalog settings the tables' credential command reads, mode 0600 "
        "(default $LAKEFLOW_HOME/aws)",
    )
    up.add_argument(
        "--rest-port",
        type=int,
        help="REST/web UI port on localhost (default $FLINK_REST_PORT or 8081)",
    )
    up.add_argument(
        "--rpc-port",
        type=int,
        help="JobManager RPC port (default $FLINK_RPC_PORT or 6123)",
    )
    up.add_argument(
        "--sql-gateway-port",
        type=int,
        help="also start Flink's SQL Gateway, REST on 127.0.0.1:PORT (default "
        "$FLINK_SQL_GATEWAY_PORT; unset: no gateway; its jar is fetched if need be)",
    )
    up.add_argument(
        "--metrics-port",
        type=int,
        metavar="PORT",
        help="serve Prometheus metrics (Flink's reporter; the job's own in the group lakeflow) at /metrics "
        "on PORT for the JobManager, the next free of PORT+1…PORT+7 for each TaskManager (default "
        "$FLINK_METRICS_PORT; unset: none)",
    )
    up.add_argument(
        "--no-native-lineage",
        action="store_true",
        help="don't load lakeflow's lineage listener (jobs' OpenLineage events into the lineage store)",
    )
    up.add_argument(
        "--openlineage-url",
        metavar="URL",
        help="the listener also POSTs each event to this Marquez- or DataHub-compatible server "
        "(API key from $OPENLINEAGE_API_KEY, given to the cluster's processes in their environment)",
    )
    up.add_argument(
        "--openlineage-endpoint",
        metavar="PATH",
        default="api/v1/lineage",
        help="the lineage endpoint under --openlineage-url (default api/v1/lineage, Marquez; "
        "DataHub: openapi/openlineage/api/v1/lineage)",
    )
    for p in (
        up,
        sub.add_parser("down", help="stop the cluster (and its SQL Gateway)"),
        sub.add_parser("status", help="whether the cluster (and its SQL Gateway) runs; exit 1 if not"),
    ):
        p.add_argument(
            "--home",
            type=Path,
            default=None,
            help="private directory for conf/, log/, pid/, tmp/ (default $LAKEFLOW_HOME/cluster)",
        )
        p.set_defaults(handler=_flink)


def _flink(args: argparse.Namespace) -> int:
    from lakeflow.runtime.flink_cluster import FlinkCluster
    from lakeflow.secret import is_secret_key
    from lakeflow.settings.core import LocalState
    from lakeflow.settings.env import load_only

    if args.flink_command == "up":
        return _up(args)
    cluster = FlinkCluster(
        args.home or load_only(LocalState, ["LAKEFLOW_HOME"], "settings").home / "cluster",
        secret_variable=is_secret_key,
    )
    if args.flink_command == "down":
        cluster.stop()
        print("Flink cluster stopped")
        return 0
    print(f"running at {cluster.rest_url}" if cluster.running() else "not running")
    if cluster.sql_gateway_running():
        print("SQL Gateway running")
    return 0 if cluster.running() else 1


def _up(args: argparse.Namespace) -> int:
    from lakeflow.aws_profile import ProfileError, renewal_note
    from lakeflow.ingest import IngestError
    from lakeflow.ingest.helpers_jar import jar_path
    from lakeflow.ingest.storage import CREDENTIAL_COMMAND, cluster_storage
    from lakeflow.lineage.config import HarvestEnv
    from lakeflow.lineage.native import listener_conf
    from lakeflow.runtime.flink_cluster import PROMETHEUS_PORTS, FlinkCluster, prometheus_reporter
    from lakeflow.runtime.jars import JarsUnavailable
    from lakeflow.secret import is_secret_key
    from lakeflow.settings import environment, load_settings
    from lakeflow.settings.env import load_only
    from lakeflow.settings.process import ProcessEnvironment

    settings = load_settings(local=args.local or None)
    ports = load_only(
        ProcessEnvironment,
        ["FLINK_REST_PORT", "FLINK_RPC_PORT", "FLINK_SQL_GATEWAY_PORT", "FLINK_METRICS_PORT"],
        "process settings",
    )
    sql_gateway_port = ports.flink_sql_gateway_port if args.sql_gateway_port is None else args.sql_gateway_port
    metrics_port = ports.flink_metrics_port if args.metrics_port is None else args.metrics_port
    if args.openlineage_url and args.no_native_lineage:
        print(
            "lakeflow flink up: --openlineage-url needs the lineage listener (drop --no-native-lineage)",
            file=sys.stderr,
        )
        return 2
    if args.openlineage_url and "@" in urlsplit(args.openlineage_url).netloc:
        print(
            "lakeflow flink up: --openlineage-url must not hold a user or password (Flink's REST API shows its "
            "configuration): set OPENLINEAGE_API_KEY instead",
            file=sys.stderr,
        )
        return 2
    try:
        storage = cluster_storage(settings, args.profile_dir or settings.home / "aws")
        lib_jars = [] if args.no_native_lineage else [jar_path()]
        metrics = {} if metrics_port is None else prometheus_reporter(metrics_port)
    except (IngestError, ProfileError, FileNotFoundError) as exc:
        print(f"lakeflow flink up: {exc}", file=sys.stderr)
        return 2
    lineage, lineage_env = {}, {}
    if not args.no_native_lineage:
        url = (
            f"{args.openlineage_url.rstrip('/')}/{args.openlineage_endpoint.lstrip('/')}"
            if args.openlineage_url
            else None
        )
        lineage = listener_conf(settings.lineage_dir, url)
        key = HarvestEnv.load(environment()).openlineage_api_key if url else None
        lineage_env = {"OPENLINEAGE_API_KEY": key.reveal()} if key is not None else {}
    cluster = FlinkCluster(
        args.home or settings.home / "cluster",
        rest_port=ports.flink_rest_port if args.rest_port is None else args.rest_port,
        rpc_port=ports.flink_rpc_port if args.rpc_port is None else args.rpc_port,
        conf={**storage.conf, **lineage, **metrics},
        env=lineage_env,
        lib_jars=lib_jars,
        secret_variable=is_secret_key,
    )
    if cluster.running():
        print(f"already running: {cluster.rest_url} (stop it first to change its settings: make cluster-down)")
    else:
        if CREDENTIAL_COMMAND in storage.conf:
            catalog_env = (args.profile_dir or settings.home / "aws").resolve() / "lakeflow-catalog.env"
            print(
                f"lakeflow flink up: catalog settings for the tables' credentials in {catalog_env} (mode 0600)",
                file=sys.stderr,
            )
            note = renewal_note(settings)
            if note:
                print(f"lakeflow flink up: {note}", file=sys.stderr)
        cluster.start()
        via = (
            ", each S3 table through its own filesystem (lakeflow-s3: its own vended credentials)"
            if CREDENTIAL_COMMAND in storage.conf
            else ""
        )
        print(
            f"Flink cluster up: {cluster.rest_url} (FLINK_CONF_DIR={cluster.conf_dir}; "
            f"{len(storage.conf)} storage settings for {storage.handle.location}{via})"
        )
        if metrics_port is not None:
            print(
                f"Prometheus metrics: http://localhost:{metrics_port}/metrics (JobManager), TaskManagers on "
                f"the next free ports up to {metrics_port + PROMETHEUS_PORTS - 1}"
            )
        if not args.no_native_lineage:
            also = f" and to {lineage['lakeflow.lineage.url']}" if "lakeflow.lineage.url" in lineage else ""
            print(f"Jobs report their lineage into {settings.lineage_dir}{also} (lakeflow harvest reads it)")
    if sql_gateway_port is not None and not cluster.sql_gateway_running():
        try:
            url = cluster.start_sql_gateway(sql_gateway_port)
        except (JarsUnavailable, RuntimeError, TimeoutError) as exc:
            print(f"SQL Gateway not started: {exc}", file=sys.stderr)
            return 1
        print(f"SQL Gateway up: {url}  (lakeflow harvest --sql-gateway-url {url})")
    print(
        "Next: make package (prints the `flink run` command for this cluster); once the job ran: make compact, "
        "make harvest"
    )
    return 0
