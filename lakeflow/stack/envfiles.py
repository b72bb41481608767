"""The dotenv files that point lakeflow at the bootstrapped Lakekeeper: one for every job (the admin's
client), or one per job, each with its own client."""

from __future__ import annotations

import io
from collections.abc import Mapping
from pathlib import Path

from lakeflow.runtime.files import write_private
from lakeflow.stack.bootstrap import BootstrapResult
from lakeflow.stack.config import JobClient, StackConfig

SECRET_LINE = "OAUTH_CLIENT_SECRET"


def env_lines(config: StackConfig, result: BootstrapResult, job: JobClient | None = None) -> dict[str, str]:
    """The ``.env.local`` entries that point lakeflow at this Lakekeeper (secrets included): as the
    admin's client, or as ``job``'s."""
    lines = {"LAKEKEEPER": config.lakekeeper, "WAREHOUSE_ID": result.warehouse_id}
    client_id, secret = (job.client_id, job.client_secret) if job else (config.client_id, config.client_secret)
    if config.token_url and client_id and secret:
        lines.update(
            TOKEN="",
            OAUTH_TOKEN_URL=config.token_url,
            OAUTH_CLIENT_ID=client_id,
            OAUTH_CLIENT_SECRET=secret.reveal(),
            OAUTH_SCOPE=config.scope or "",
        )
    if config.s3_public_endpoint:
        lines["S3_ENDPOINT"] = config.s3_public_endpoint
    lines["NAMESPACE"] = ".".join(config.namespace)
    return lines


def shown(lines: Mapping[str, str]) -> list[str]:
    """``lines`` as printed: the secret as ``***``, empty entries (a cleared TOKEN) left out."""
    return [f"{key}={'***' if key == SECRET_LINE else value}" for key, value in lines.items() if value]


def write_env(path: Path, lines: Mapping[str, str]) -> None:
    """Set ``lines`` in the dotenv file ``path`` (other lines kept, python-dotenv's parser); the
    file is rewritten private (0600), as it holds secrets."""
    from dotenv.parser import parse_stream

    text = path.read_text() if path.exists() else ""
    out, found = [], set()
    for binding in parse_stream(io.StringIO(text)):
        if binding.key is not None and binding.key in lines:  # every occurrence, as set_key does
            out.append(f"{binding.key}={lines[binding.key]}\n")
            found.add(binding.key)
        else:
            out.append(binding.original.string)
    if out and not out[-1].endswith("\n"):
        out.append("\n")
    out += [f"{key}={value}\n" for key, value in lines.items() if key not in found]
    write_private(path, "".join(out))


def write_job_envs(folder: Path, lines_by_job: Mapping[str, Mapping[str, str]]) -> list[Path]:
    """``folder``/<job>.env for each job (created 0700 when missing; each file 0600, its other lines kept)."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    written = []
    for job, lines in lines_by_job.items():
        path = folder / f"{job}.env"
        write_env(path, lines)
        written.append(path)
    return written
