"""``lakeflow harvest``: Flink jobs, runs and lineage (plus compaction runs) → DataHub / OpenLineage /
JSON / a picture (HTML, DOT, Mermaid); ``lakeflow lineage view``: the picture of a saved harvest
and/or the lineage store."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lakeflow.lineage.config import HarvestEnv

FORMATS = ("json", "datahub", "openlineage", "html", "dot", "mermaid")
PICTURES = ("html", "dot", "mermaid")


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "harvest",
        help="harvest Flink jobs, runs and lineage from the JobManager REST API",
        description="Read jobs, plans, runs and lineage from a Flink JobManager (and a SQL Gateway for "
        "catalog tables), merge the compaction's run events, and write DataHub MCPs, "
        "OpenLineage events, neutral JSON or a picture of the lineage (html: one self-contained "
        "page; dot; mermaid). Credentials come from the environment or .env.local: "
        "FLINK_API_TOKEN or FLINK_API_USERNAME/FLINK_API_PASSWORD, DATAHUB_GMS_TOKEN, "
        "OPENLINEAGE_API_KEY.",
    )
    p.add_argument("--rest-url", help="JobManager REST URL, e.g. http://localhost:8081 (or in --recipe)")
    p.add_argument("--sql-gateway-url", help="SQL Gateway REST URL, resolves SQL catalog tables")
    p.add_argument("--recipe", type=Path, help="recipe YAML (DataHub flink-source layout); flags override it")
    p.add_argument("--format", choices=FORMATS, default="json", help="output format (default json)")
    p.add_argument("--output", default="-", help="output file, '-' for stdout (default)")
    p.add_argument("--datahub-gms", metavar="URL", help="also send the DataHub MCPs to this GMS over REST")
    p.add_argument(
        "--datahub-token",
        metavar="SOURCE",
        help="GMS token from env:VAR or file:PATH (default: $DATAHUB_GMS_TOKEN if set); never the token itself",
    )
    p.add_argument(
        "--openlineage-url",
        metavar="URL",
        help="also post the OpenLineage run events to this Marquez- or DataHub-compatible server "
        "(API key from $OPENLINEAGE_API_KEY)",
    )
    p.add_argument(
        "--openlineage-endpoint",
        metavar="PATH",
        default="api/v1/lineage",
        help="the lineage endpoint under --openlineage-url (default api/v1/lineage, Marquez; "
        "DataHub: openapi/openlineage/api/v1/lineage)",
    )
    p.add_argument("--env", help="DataHub environment (default PROD)")
    p.add_argument("--platform-instance", help="platform instance of the Flink cluster")
    p.add_argument("--job-name-allow", action="append", metavar="REGEX", help="only jobs whose name matches")
    p.add_argument("--job-name-deny", action="append", metavar="REGEX", help="skip jobs whose name matches")
    p.add_argument(
        "--include-job-states", metavar="STATES", help="comma-separated, default RUNNING,FINISHED,FAILED,CANCELED"
    )
    p.add_argument("--operator-granularity", choices=("job", "vertex"), help="one task per job (default) or vertex")
    p.add_argument("--no-lineage", action="store_true", help="skip plan lineage")
    p.add_argument("--no-run-history", action="store_true", help="skip runs (DataProcessInstances)")
    p.add_argument(
        "--trust-operator-names",
        action="store_true",
        help="turn name-only evidence (an operator named KafkaSource-x) into lineage edges",
    )
    p.add_argument("--max-workers", type=int, help="parallel job fetches (default 10)")
    p.add_argument("--timeout", type=float, help="HTTP timeout in seconds (default 30)")
    p.add_argument("--max-retries", type=int, help="retries on 5xx/429/connection errors (default 3)")
    p.add_argument(
        "--lineage-dir",
        type=Path,
        help="the lineage store to merge: OpenLineage run events, one JSON file each, of the compaction and of "
        "the Flink jobs lakeflow's listener saw (their SQL tables named by it); the harvest's user must read "
        "the folder and its files, docs/harvest.md (default $LINEAGE_DIR, else $LAKEFLOW_HOME/lineage if present)",
    )
    p.add_argument("--state-file", type=Path, help="enable stale-entity removal with this state file")
    p.add_argument("--fail-safe-threshold", type=float, help="max %% of entities removed at once (default 75)")
    p.set_defaults(handler=run)

    lineage = subparsers.add_parser(
        "lineage",
        help="the lineage picture of a saved harvest and the lineage store",
        description="Work with harvested lineage.",
    )
    sub = lineage.add_subparsers(dest="lineage_command", metavar="COMMAND", required=True)
    v = sub.add_parser(
        "view",
        help="draw a saved harvest (and/or the lineage store) as HTML, DOT or Mermaid",
        description="Draw the lineage graph of a saved harvest (`lakeflow harvest --format json --output FILE`) "
        "and/or the compaction runs of the lineage store. With both, the store's compaction runs "
        "replace those the harvest saw (the store is newer). Without --harvest the lineage store "
        "alone is drawn (default $LINEAGE_DIR, else $LAKEFLOW_HOME/lineage).",
    )
    v.add_argument("--harvest", type=Path, metavar="FILE", help="a `lakeflow harvest --format json` document")
    v.add_argument(
        "--lineage-dir",
        type=Path,
        help="the lineage store: its compaction runs are drawn (or replace those of --harvest); its Flink runs "
        "join the graph through a harvest",
    )
    v.add_argument("--format", choices=PICTURES + ("json",), default="html", help="output format (default html)")
    v.add_argument("--output", default="-", help="output file, '-' for stdout (default)")
    v.add_argument("--title", default="lakeflow lineage", help="the page title (html)")
    v.set_defaults(handler=view)


# flag (its argparse dest) → the recipe key it sets
FLAG_KEYS = {
    "rest_url": ("connection", "rest_api_url"),
    "sql_gateway_url": ("connection", "sql_gateway_url"),
    "timeout": ("connection", "timeout_seconds"),
    "max_retries": ("connection", "max_retries"),
    "job_name_allow": ("job_name_pattern", "allow"),
    "job_name_deny": ("job_name_pattern", "deny"),
    "include_job_states": ("include_job_states",),
    "env": ("env",),
    "platform_instance": ("platform_instance",),
    "operator_granularity": ("operator_granularity",),
    "max_workers": ("max_workers",),
    "lineage_dir": ("lineage_dir",),
    "state_file": ("stateful_ingestion", "state_file"),
    "fail_safe_threshold": ("stateful_ingestion", "fail_safe_threshold"),
    "no_lineage": ("include_lineage",),
    "no_run_history": ("include_run_history",),
    "trust_operator_names": ("trust_operator_names",),
}


def _flag_values(args: argparse.Namespace) -> dict[str, Any]:
    """The harvest flags given, as the values of their recipe keys."""
    out: dict[str, Any] = {}
    for dest in FLAG_KEYS:
        value = getattr(args, dest)
        if value is None or value is False:
            continue
        if dest == "include_job_states":
            value = [s.strip() for s in value.split(",") if s.strip()]
        elif dest in ("no_lineage", "no_run_history"):
            value = False
        elif isinstance(value, Path):
            value = str(value)
        out[dest] = value
    return out


def _config(args: argparse.Namespace, environ: dict[str, str], env: HarvestEnv):
    """The recipe (or none) with the flags set into it, validated once; then the FLINK_API_*
    credentials of the environment and a URL's user:password moved into the connections' auth."""
    from dataclasses import replace

    from lakeflow.lineage.config import ConfigError, from_mapping, read_recipe

    if not (args.recipe or args.rest_url):
        raise ConfigError("give --rest-url URL (the JobManager REST API) or --recipe FILE")
    data = read_recipe(args.recipe) if args.recipe else {}
    flags = _flag_values(args)
    if isinstance(data, Mapping):
        data = _set(data, [(FLAG_KEYS[dest], value) for dest, value in flags.items()])
        if "state_file" in flags:  # --state-file turns stale-entity removal on
            data = _set(data, [(("stateful_ingestion", "enabled"), True)])
    cfg = from_mapping(data, {FLAG_KEYS[dest]: "--" + dest.replace("_", "-") for dest in flags})
    conn = cfg.connection
    if env.flink_api_token or env.flink_api_username or env.flink_api_password:
        from lakeflow.lineage.flink_rest import Auth

        try:
            conn = replace(conn, auth=Auth(env.flink_api_token, env.flink_api_username, env.flink_api_password))
        except ValueError as exc:
            raise ConfigError(f"FLINK_API_* environment: {exc}") from None
    conn = _userinfo_as_auth(conn)
    gateway = _userinfo_as_auth(replace(conn, url=cfg.sql_gateway.url)) if cfg.sql_gateway else None
    return replace(cfg, connection=conn, sql_gateway=gateway, lineage_dir=cfg.lineage_dir or env.store(environ))


def _set(data: Mapping[str, Any], values: list[tuple[tuple[str, ...], Any]]) -> dict[str, Any]:
    """``data`` with each (key path, value) set, the mappings on the way copied (or created)."""
    out = dict(data)
    for path, value in values:
        node = out
        for key in path[:-1]:
            inner = node.get(key)
            node[key] = dict(inner) if isinstance(inner, Mapping) else {} if inner is None else inner
            node = node[key]
            if not isinstance(node, dict):
                break  # not a mapping: validation names it
        else:
            node[path[-1]] = value
    return out


def _userinfo_as_auth(conn):
    """``conn`` with a URL's ``user:password@`` moved into its HTTP basic auth (as requests would
    use it), so the URL that is logged, shown and published (``externalUrl``) holds no credentials."""
    from dataclasses import replace
    from urllib.parse import unquote, urlsplit

    from lakeflow.lineage.config import ConfigError
    from lakeflow.lineage.flink_rest import Auth
    from lakeflow.secret import Secret, redact_url

    parts = urlsplit(conn.url)
    if parts.username is None:
        return conn
    try:
        auth = Auth(username=unquote(parts.username), password=Secret(unquote(parts.password or "")))
    except ValueError as exc:
        raise ConfigError(f"{redact_url(conn.url)}: {exc}") from None
    return replace(conn, url=parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl(), auth=auth)


def _token(source, environ: dict[str, str], env: HarvestEnv):
    from lakeflow.lineage.config import ConfigError
    from lakeflow.secret import Secret

    if source is None:
        return env.datahub_gms_token
    kind, _, ref = source.partition(":")
    if kind == "env" and ref:
        if ref not in environ:
            raise ConfigError(f"--datahub-token env:{ref}: environment variable {ref} is not set")
        return Secret(environ[ref])
    if kind == "file" and ref:
        try:
            return Secret(Path(ref).read_text().strip())
        except OSError as exc:
            raise ConfigError(f"--datahub-token file:{ref}: {exc.strerror}") from None
    raise ConfigError("--datahub-token: expected env:VAR or file:PATH (a token on the command line would leak)")


def run(args: argparse.Namespace) -> int:
    from lakeflow.lineage.config import ConfigError, HarvestEnv
    from lakeflow.lineage.emit_datahub import EmitError
    from lakeflow.lineage.flink_rest import FlinkRestError
    from lakeflow.settings import environment

    try:
        environ = environment()
        env = HarvestEnv.load(environ)
        cfg = _config(args, environ, env)
        token = _token(args.datahub_token, environ, env)
        return _run(args, cfg, token, env)
    except (ConfigError, FlinkRestError, EmitError, ValueError) as exc:
        print(f"lakeflow harvest: {exc}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace, cfg, token, env: HarvestEnv) -> int:
    from lakeflow.lineage import state
    from lakeflow.lineage.harvest import harvest
    from lakeflow.lineage.report import HarvestReport
    from lakeflow.secret import redact_url

    report = HarvestReport()
    result = harvest(cfg, report)
    graph = result.graph
    removed: tuple[str, ...] = ()
    if cfg.state_file is not None:
        current = state.owned(graph, cfg.env, cfg.platform_instance)
        verdict = state.check(state.load(cfg.state_file), current, result.protected_names, cfg.fail_safe_threshold)
        if verdict.warning:
            report.warnings.append(verdict.warning)
        removed = verdict.removed if cfg.remove_stale_metadata else ()
        report.removed = list(removed)
    with report.timed("emit"):
        mcps = ol_events = None
        if args.format == "json":
            from lakeflow.lineage import emit_json

            _write(args.output, emit_json.dumps(graph, removed))
        elif args.format == "openlineage":
            from lakeflow.lineage.emit_openlineage import events

            ol_events = events(graph, cfg.platform_instance)
            _write_events(args.output, ol_events)
        elif args.format in PICTURES:
            from lakeflow.lineage.emit_json import document

            _write(args.output, _picture(args.format, document(graph, removed)))
        else:
            from lakeflow.lineage import emit_datahub

            mcps = emit_datahub.proposals(graph, cfg.env, cfg.platform_instance, removed)
            _write(args.output, emit_datahub.dumps(mcps))
        if args.openlineage_url:
            from lakeflow.lineage.emit_openlineage import events, send

            ol_events = ol_events if ol_events is not None else events(graph, cfg.platform_instance)
            sent = send(
                ol_events,
                args.openlineage_url,
                args.openlineage_endpoint,
                env.openlineage_api_key,
                cfg.connection.timeout_s,
                cfg.connection.max_retries,
            )
            print(f"sent {sent} OpenLineage events to {redact_url(args.openlineage_url)}", file=sys.stderr)
        if args.datahub_gms:
            from lakeflow.lineage import emit_datahub

            mcps = mcps or emit_datahub.proposals(graph, cfg.env, cfg.platform_instance, removed)
            sent = emit_datahub.send(
                mcps, args.datahub_gms, token, cfg.connection.timeout_s, cfg.connection.max_retries
            )
            print(f"sent {sent} proposals to {redact_url(args.datahub_gms)}", file=sys.stderr)
    if cfg.state_file is not None and not verdict.warning:
        state.save(cfg.state_file, verdict.state)  # only after the output is written
    for line in report.lines():
        print(line, file=sys.stderr)
    print(next_steps(args.format, args.output), file=sys.stderr)
    return 1 if report.jobs_failed else 0


def next_steps(fmt: str, output: str) -> str:
    """The natural next command after a harvest in ``fmt`` written to ``output``."""
    from lakeflow.cli.output import shown

    if fmt == "html" and output != "-":
        return f"Next: open {Path(output).resolve().as_uri()} in a browser (the lineage page; offline)"
    if fmt == "json" and output != "-":
        return f"Next: {shown('lineage', 'view', '--harvest', output, '--output', 'lineage.html')} (its page)"
    return f"Next: {shown('harvest', '--rest-url', 'URL', '--format', 'html', '--output', 'lineage.html')} (the page)"


def _picture(fmt: str, doc: dict, title: str = "lakeflow lineage") -> str:
    from lakeflow.lineage import render

    if fmt == "html":
        return render.html_page(doc, title)
    return render.dot(doc) if fmt == "dot" else render.mermaid(doc)


def _write_events(output: str, events) -> None:
    """JSON Lines through openlineage-python's FileTransport (a regular file), else the same text."""
    from lakeflow.lineage.openlineage import dumps, write_jsonl

    path = Path(output)
    if output == "-" or (path.exists() and not path.is_file()):
        _write(output, dumps(events))
    else:
        write_jsonl(events, path)


def view(args: argparse.Namespace) -> int:
    """``lakeflow lineage view``: a saved harvest and/or the lineage store → html / dot / mermaid / json."""
    import json

    from lakeflow.lineage.config import HarvestEnv
    from lakeflow.lineage.emit_json import document, with_compaction_runs
    from lakeflow.settings import environment

    try:
        environ = environment()
        store_dir = args.lineage_dir or (None if args.harvest else HarvestEnv.load(environ).store(environ))
        doc = None
        if args.harvest is not None:
            try:
                doc = json.loads(args.harvest.read_text())
            except OSError as exc:
                raise ValueError(f"--harvest {args.harvest}: {exc.strerror}") from None
            except ValueError as exc:
                raise ValueError(f"--harvest {args.harvest}: not JSON ({exc})") from None
            if (
                not isinstance(doc, dict)
                or not isinstance(doc.get("jobs"), list)
                or not isinstance(doc.get("edges"), list)
            ):
                raise ValueError(f"--harvest {args.harvest}: not a `lakeflow harvest --format json` document")
        if store_dir is not None:
            from lakeflow.lineage.graph import build
            from lakeflow.lineage.stored_runs import read_runs

            if not store_dir.is_dir():
                raise ValueError(f"--lineage-dir {store_dir}: no such directory")
            stored = document(build([], read_runs(store_dir), vertex_granularity=False, rest_url=""))
            doc = stored if doc is None else with_compaction_runs(doc, stored)
        if doc is None:
            raise ValueError(
                "nothing to draw: give --harvest FILE (a `lakeflow harvest --format json` output) "
                "or --lineage-dir DIR (set LINEAGE_DIR or LAKEFLOW_HOME to find the store)"
            )
        if args.format == "json":
            text = json.dumps(doc, indent=2, sort_keys=True) + "\n"
        else:
            text = _picture(args.format, doc, args.title)
        _write(args.output, text)
        if args.output != "-":
            print(f"wrote {args.output}", file=sys.stderr)
        return 0
    except (ValueError, KeyError, TypeError) as exc:
        print(f"lakeflow lineage view: {exc}", file=sys.stderr)
        return 2


def _write(output: str, text: str) -> None:
    if output == "-":
        sys.stdout.write(text)
        return
    path = Path(output)
    if path.exists() and not path.is_file():  # /dev/null, a pipe: write through, never replace it
        path.write_text(text)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    tmp.replace(path)
