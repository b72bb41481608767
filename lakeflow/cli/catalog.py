"""``lakeflow register | vend | doctor | credential-process``: the table's catalog side from a shell."""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from collections.abc import Callable
from contextlib import ExitStack
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from lakeflow.errors import ConfigurationError, LakeflowError
from lakeflow.uris import S3_SCHEMES, is_s3

if TYPE_CHECKING:
    from lakeflow.catalog.base import TableHandle
    from lakeflow.settings import Settings

FORMATS = ("flink", "spark", "s3a", "boto3")


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the catalog commands to the ``lakeflow`` parser."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--namespace", metavar="NS", help="namespace, levels separated by '.' (default: $NAMESPACE, else iot)"
    )
    common.add_argument("--table", metavar="NAME", help="table name (default: $TABLE, else sensor-readings)")
    common.add_argument(
        "--local", action="store_true", help="use the embedded local catalog even when LAKEKEEPER/WAREHOUSE_ID are set"
    )

    p = subparsers.add_parser(
        "register",
        parents=[common],
        help="register the raw table (idempotent); print its location",
        description="Create the generic table (format 'dataset') in the catalog, or find it "
        "already registered. Prints the table location on stdout; says on stderr "
        "whether it was created or already registered.",
    )
    p.add_argument("--location", help="base location URI (default: the catalog chooses one)")
    p.set_defaults(handler=_register)

    p = subparsers.add_parser(
        "vend",
        parents=[common],
        help="print the table's vended storage settings as key=value",
        description="Load the table with vended credentials and print the S3A settings for one "
        "engine as key=value lines (secrets as *** unless --show-secrets). The first "
        "line is a comment with the credentials' expiry.",
    )
    p.add_argument(
        "--format",
        choices=FORMATS,
        default="flink",
        help="flink: fs.s3a.* Flink configuration; spark: spark.hadoop.fs.s3a.*; "
        "s3a: Hadoop fs.s3a.*; boto3: boto3 client arguments (default: flink)",
    )
    p.add_argument(
        "--show-secrets",
        action="store_true",
        help="print keys and tokens in clear (they land in your terminal history)",
    )
    p.set_defaults(handler=_vend)

    p = subparsers.add_parser(
        "doctor",
        parents=[common],
        help="check settings, token, table and storage access",
        description="Check, one line each (PASS/FAIL/SKIP): the settings, the token, the "
        "warehouse, the table, its vended credentials, and that they can put, list "
        "and delete a probe object under the table prefix (for a file:// table: that "
        "its directory is writable); with --access read, that they can list and read "
        "there, writing nothing. Exits 1 when a check fails.",
    )
    p.add_argument(
        "--access",
        choices=("write", "read"),
        default="write",
        help="what the job needs of the table: write (the ingestion: put, list, delete) or read "
        "(a reader such as the compaction, which holds select on the raw table: list and get) "
        "(default %(default)s)",
    )
    p.set_defaults(handler=_doctor)

    p = subparsers.add_parser(
        "credential-process",
        parents=[common],
        help="print fresh vended credentials as AWS credential_process JSON",
        description="For ~/.aws/config: credential_process = lakeflow credential-process "
        "--namespace NS --table T. Prints {Version, AccessKeyId, SecretAccessKey, "
        "SessionToken, Expiration} from a fresh /credentials call. Its stdout holds "
        "secrets by contract: the AWS SDK reads it; do not redirect it to a file.",
    )
    p.set_defaults(handler=_credential_process)


# -- handlers -------------------------------------------------------------------------------------


def _register(args: argparse.Namespace) -> int:
    from lakeflow.catalog import open_catalog
    from lakeflow.streams import load_pipeline

    settings = _settings(args)
    if settings.pipeline is not None and args.location:
        raise ConfigurationError("--location is one table's: the pipeline's streams get locations from the catalog")
    tables = (
        [(settings.namespace, settings.table)]
        if settings.pipeline is None
        else [(s.namespace, s.table) for s in load_pipeline(settings).streams()]
    )
    with open_catalog(settings) as catalog:
        for namespace, table in tables:
            handle = catalog.register(namespace, table, location=args.location)
            state = "created" if handle.created else "already registered"
            print(f"{state}: {handle.ident} in the {catalog.name} catalog", file=sys.stderr)
            print(handle.location)
    return 0


def _vend(args: argparse.Namespace) -> int:
    from lakeflow.catalog import open_catalog
    from lakeflow.credentials import show

    settings = _settings(args)
    with open_catalog(settings) as catalog:
        handle = catalog.load(settings.namespace, settings.table)
    if not is_s3(handle.location):
        print(f"# {handle.location} is not on S3: no storage settings needed")
        return 0
    s3a = handle.s3a(settings.s3_endpoint)
    if not handle.storage.has_keys:
        print("# no credentials vended (STS off): the engine's own AWS credentials apply")
    elif s3a.expires_at:
        print(f"# expires-at={_when(s3a.expires_at)}")
    else:
        print("# expires-at=unknown")
    for line in show(s3a.view(args.format), args.show_secrets):
        print(line)
    return 0


def _credential_process(args: argparse.Namespace) -> int:
    from lakeflow.catalog import open_catalog
    from lakeflow.credentials import to_s3a

    settings = _settings(args)
    with open_catalog(settings) as catalog:
        vended = catalog.credentials(settings.namespace, settings.table)
    s3a = to_s3a(vended)
    kwargs = s3a.boto3()
    if "aws_access_key_id" not in kwargs:
        print(
            f"lakeflow credential-process: no credentials vended for {settings.namespace_str}.{settings.table}",
            file=sys.stderr,
        )
        return 1
    out = {
        "Version": 1,
        "AccessKeyId": kwargs["aws_access_key_id"],
        "SecretAccessKey": kwargs.get("aws_secret_access_key", ""),
    }
    if "aws_session_token" in kwargs:
        out["SessionToken"] = kwargs["aws_session_token"]
    if s3a.expires_at:
        out["Expiration"] = s3a.expires_at.strftime("%Y-%m-%dT%H:%M:%SZ")
    print(json.dumps(out, separators=(",", ":")))  # secrets on stdout by contract; compact: SDK v1 reads 1 KiB
    return 0


# -- doctor ---------------------------------------------------------------------------------------


class _Failed(LakeflowError):
    """A doctor check failed; the message says why."""


def _doctor(args: argparse.Namespace) -> int:
    from lakeflow.catalog import CatalogError, TableNotFound, open_catalog
    from lakeflow.settings import SettingsError

    state: dict = {}
    stack = ExitStack()

    def settings_check() -> str:
        try:
            state["settings"] = s = _settings(args)
        except SettingsError as exc:
            raise _Failed("; ".join(line.strip() for line in str(exc).splitlines()[1:])) from None
        where = f"{s.lakekeeper}, warehouse {s.warehouse}" if s.catalog == "lakekeeper" else str(s.home)
        return f"{s.catalog} catalog ({where}), table {s.namespace_str}.{s.table}"

    def catalog_check() -> str:
        from lakeflow.auth import AuthError, OAuthClientCredentials
        from lakeflow.catalog.lakekeeper import LakekeeperCatalog

        state["catalog"] = catalog = stack.enter_context(open_catalog(state["settings"]))
        if not isinstance(catalog, LakekeeperCatalog):
            return "embedded local catalog: no token needed"
        auth = catalog.auth
        if auth is None:
            return "no TOKEN or OAUTH_*: requests are sent without a token"
        if not isinstance(auth, OAuthClientCredentials):
            return "static TOKEN set"
        try:
            auth.token()
        except AuthError as exc:
            raise _Failed(str(exc)) from None
        return f"OAuth2 client-credentials token fetched from {auth.token_url}"

    def warehouse_check() -> str:
        catalog = state["catalog"]
        if catalog.name != "lakekeeper":
            return "local warehouse"
        try:
            warehouse_id = catalog.warehouse_id
        except CatalogError as exc:
            raise _Failed(str(exc)) from None
        name = catalog.warehouse
        return warehouse_id if name == warehouse_id else f"{name} -> {warehouse_id}"

    def table_check() -> str:
        s = state["settings"]
        try:
            state["handle"] = handle = state["catalog"].load(s.namespace, s.table)
        except TableNotFound as exc:
            raise _Failed(f"{exc}: run `lakeflow register`") from None
        except CatalogError as exc:
            raise _Failed(str(exc)) from None
        return f"{handle.ident} at {handle.location}"

    def credentials_check() -> str:
        handle = state["handle"]
        if urlparse(handle.location).scheme == "file":
            return "file:// table: none needed"
        if not handle.storage.has_keys:
            return "none vended (STS off): the default AWS credential chain applies"
        expires = handle.expires_at
        if expires and expires <= datetime.now(timezone.utc):
            raise _Failed(f"vended credentials expired at {_when(expires)}")
        return f"vended, expire {_when(expires)}" if expires else "vended, no expiry given"

    def storage_check() -> str:
        handle = state["handle"]
        location = urlparse(handle.location)
        if location.scheme == "file":
            return _probe_directory(Path(location.path), args.access)
        if location.scheme not in S3_SCHEMES:
            raise _Failed(f"cannot probe {location.scheme}:// locations")
        return _probe_s3(handle, state["settings"], args.access)

    checks: list[tuple[str, Callable[[], str]]] = [
        ("settings", settings_check),
        ("token", catalog_check),
        ("warehouse", warehouse_check),
        ("table", table_check),
        ("credentials", credentials_check),
        ("storage", storage_check),
    ]
    failed: str | None = None
    with stack:  # closes the catalog
        for name, check in checks:
            if failed:
                print(f"SKIP {name}: needs {failed}")
                continue
            try:
                print(f"PASS {name}: {check()}")
            except (_Failed, CatalogError) as exc:
                print(f"FAIL {name}: {exc}")
                failed = name
    return 1 if failed else 0


def _probe_directory(path: Path, access: str) -> str:
    if not path.is_dir():
        raise _Failed(f"{path} does not exist: run `lakeflow register`")
    if access == "read":
        try:
            next(path.iterdir(), None)
        except OSError as exc:
            raise _Failed(f"{path} is not readable: {exc.strerror}") from None
        return f"{path} is readable"
    probe = path / f".lakeflow-doctor-{uuid.uuid4().hex}"
    try:
        probe.write_bytes(b"probe")
        probe.unlink()
    except OSError as exc:
        raise _Failed(f"{path} is not writable: {exc.strerror}") from None
    return f"{path} is writable"


def _probe_s3(handle: TableHandle, settings: Settings, access: str) -> str:
    """Put, list and delete a probe object under the table prefix with the vended credentials; for
    ``access`` read: list the prefix and read the first object found, writing nothing."""
    import boto3
    from botocore.config import Config
    from botocore.exceptions import BotoCoreError, ClientError

    kwargs = handle.s3a(settings.s3_endpoint).boto3()
    limits = Config(connect_timeout=5, read_timeout=10, retries={"max_attempts": 2})
    kwargs["config"] = kwargs["config"].merge(limits) if "config" in kwargs else limits
    location = urlparse(handle.location)
    bucket, prefix = location.netloc, location.path.strip("/") + "/"
    key = f"{prefix}.lakeflow-doctor-{uuid.uuid4().hex}"
    step = "put" if access == "write" else "list"
    try:
        s3 = boto3.client("s3", **kwargs)
        if access == "read":
            listed = s3.list_objects_v2(Bucket=bucket, Prefix=prefix, MaxKeys=1)
            first = next((o["Key"] for o in listed.get("Contents", [])), None)
            if first is None:
                return f"list under s3://{bucket}/{prefix} works (nothing there to read yet)"
            step, key = "read", first
            s3.head_object(Bucket=bucket, Key=first)  # s3:GetObject, without the body
            return f"list and read under s3://{bucket}/{prefix} work (endpoint {kwargs.get('endpoint_url', 'AWS')})"
        s3.put_object(Bucket=bucket, Key=key, Body=b"lakeflow doctor probe")
        step = "list"
        listed = s3.list_objects_v2(Bucket=bucket, Prefix=prefix, MaxKeys=1000)
        if not any(o["Key"] == key for o in listed.get("Contents", [])) and not listed.get("IsTruncated"):
            raise _Failed(f"list s3://{bucket}/{prefix}: the probe object just written is missing")
        step = "delete"
        s3.delete_object(Bucket=bucket, Key=key)
    except ClientError as exc:
        error = exc.response.get("Error", {})
        raise _Failed(
            f"{step} s3://{bucket}/{key}: {error.get('Code', '?')} ({error.get('Message', 'no message')})"
        ) from None
    except BotoCoreError as exc:
        raise _Failed(f"{step} s3://{bucket}/{key}: {exc}") from None
    endpoint = kwargs.get("endpoint_url", "AWS")
    return f"put, list and delete under s3://{bucket}/{prefix} work (endpoint {endpoint})"


# -- helpers --------------------------------------------------------------------------------------


def _settings(args: argparse.Namespace) -> Settings:
    """Settings from the environment and .env.local, with --namespace/--table/--local applied."""
    from lakeflow.settings import load_settings

    flags = {"NAMESPACE": args.namespace, "TABLE": args.table}
    overrides = {k: v for k, v in flags.items() if v}
    if args.table:  # one table named: the pipeline file's streams do not apply
        overrides["PIPELINE"] = ""
    return load_settings(local=True if args.local else None, overrides=overrides)


def _when(moment: datetime) -> str:
    left = moment - datetime.now(timezone.utc)
    minutes = int(left.total_seconds() // 60)
    return f"{moment.strftime('%Y-%m-%dT%H:%M:%SZ')} (in {minutes} min)"
