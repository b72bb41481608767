"""``.env.example`` written from the settings models (``python -m lakeflow.cli.env_example >
.env.example``): each variable's description, default and
example come from its field, so the file and the code cannot drift (tests/unit/test_settings.py checks)."""

from __future__ import annotations

import inspect
import textwrap
from typing import Any

from pydantic_core import PydanticUndefined

from lakeflow.settings.env import EnvModel, variables

WIDTH = 100
# Copied as is, .env.example keeps the embedded local catalog and runs a bounded demo: every
# variable is commented out but these.
ACTIVE = {"NUM_RECORDS": "1000", "BATCH_SIZE": "50", "BATCH_INTERVAL_MS": "1000"}  # ~20 s of data
HEADER = """\
lakeflow settings. Copy to .env.local (git-ignored): as is, lakeflow uses its embedded local
catalog and emits a bounded demo of NUM_RECORDS readings (50 a second); uncomment and set what you need. The
environment wins over the file; LAKEFLOW_ENV_FILE names another file. Every variable below shows
its default (or an example). Generated from the settings models: `python -m
lakeflow.cli.env_example > .env.example`; edit the field descriptions, not this file."""
FOOTER = """\
Long-running jobs refreshing their credentials (docs/operations.md) also need the AWS SDK's own
AWS_PROFILE and AWS_SHARED_CREDENTIALS_FILE / AWS_CREDENTIAL_PROFILES_FILE in the environment of
every Flink TaskManager and Spark process: not lakeflow settings; `lakeflow aws-profile --format
env` prints them."""


def sections() -> list[type[EnvModel]]:
    """Every model whose variables .env.example documents, in its order."""
    from lakeflow.compaction.config import CompactEnv
    from lakeflow.lineage.config import HarvestEnv
    from lakeflow.settings.core import SECTIONS
    from lakeflow.settings.process import ProcessEnvironment
    from lakeflow.stack import StackConfig

    return [*SECTIONS, CompactEnv, HarvestEnv, ProcessEnvironment, StackConfig]


def shown(field: Any) -> str:
    """A field's value as .env.example shows it: its first example, else its default."""
    if field.examples:
        return str(field.examples[0])
    default = field.default
    if default is None or default is PydanticUndefined:
        return ""
    if isinstance(default, bool):
        return str(default).lower()
    return ".".join(default) if isinstance(default, tuple) else str(default)


def comment(text: str) -> list[str]:
    return textwrap.wrap(
        text, WIDTH - 2, initial_indent="# ", subsequent_indent="# ", break_on_hyphens=False, break_long_words=False
    )


def render() -> str:
    lines = [*comment(HEADER)]
    seen: set[str] = set()
    for model in sections():
        title, _, intro = inspect.cleandoc(model.__doc__ or model.__name__).partition("\n")
        title = title.rstrip(".")
        lines += ["", f"# --- {title} " + "-" * max(3, WIDTH - 6 - len(title))]
        if intro.strip():
            lines += comment(" ".join(intro.split()))
        for name, field in variables(model).items():
            if name in seen:
                continue
            seen.add(name)
            lines += comment(field.description or "")
            lines.append(f"{name}={ACTIVE[name]}" if name in ACTIVE else f"# {name}={shown(field)}")
    lines += ["", *comment(FOOTER)]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(render(), end="")
