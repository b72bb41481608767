"""The ``lakeflow`` parsers: docs/cli.md is generated from them and current; building them reads no
setting, so a bad value fails only the command that uses it, in one line naming the variable."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from lakeflow.cli import reference as cli_reference
from lakeflow.cli.env_example import sections
from lakeflow.cli.main import build_parser
from lakeflow.settings.env import variables

ROOT = Path(__file__).resolve().parents[1]
LAKEFLOW = [sys.executable, "-m", "lakeflow.cli"]


def test_cli_reference_is_current() -> None:
    assert (ROOT / "docs" / "cli.md").read_text() == cli_reference.render(), (
        "docs/cli.md is stale: .venv/bin/python -m lakeflow.cli.reference > docs/cli.md"
    )


def test_cli_reference_gives_every_command_a_section_with_its_options() -> None:
    sections = dict(re.findall(r"^#+ `(lakeflow[^`]*)`\n(.*?)(?=^#+ `lakeflow|\Z)", cli_reference.render(),
                               re.MULTILINE | re.DOTALL))
    root = build_parser()
    assert set(sections) == {"lakeflow", *(" ".join(["lakeflow", *path]) for path, _, _ in cli_reference.commands(root))}
    for path, _, parser in [((), "", root), *cli_reference.commands(root)]:
        name = " ".join(["lakeflow", *path])
        assert f"\n{name} [-h]" in sections[name]  # its usage
        rows = re.findall(r"^\| `([^`]+)` \|", sections[name], re.MULTILINE)
        flags = [a.option_strings for a in parser._actions if a.option_strings and a.help != argparse.SUPPRESS
                 and not isinstance(a, argparse._HelpAction)]
        assert [row.split(" ")[0].rstrip(",") for row in rows if row.startswith("-")] == [f[0] for f in flags], name


class RecordingEnviron(dict[str, str]):
    """``os.environ`` stand-in recording every variable looked up."""

    def __init__(self, values: dict[str, str]) -> None:
        super().__init__(values)
        self.read: list[str] = []

    def __getitem__(self, key: str) -> str:
        self.read.append(key)
        return super().__getitem__(key)

    def get(self, key: str, default: object = None):  # type: ignore[override]
        self.read.append(key)
        return super().get(key, default)

    def __contains__(self, key: object) -> bool:
        self.read.append(str(key))
        return super().__contains__(key)

    def items(self) -> Iterator[tuple[str, str]]:  # type: ignore[override]
        self.read.append("*")
        return iter(list(super().items()))


def test_building_the_parsers_reads_no_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    """No lakeflow variable is read (argparse's own gettext and terminal size lookups aside)."""
    ours = {name for model in sections() for name in variables(model)}
    recording = RecordingEnviron(dict(os.environ))
    monkeypatch.setattr(os, "environ", recording)
    build_parser()
    read = set(recording.read)
    assert "*" not in read and not read & ours, f"read while the parsers are built: {sorted(read & ours)}"


def lakeflow(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*LAKEFLOW, *args], env={**os.environ, **env}, cwd=ROOT, capture_output=True, text=True,
                          timeout=120)


def test_a_bad_port_variable_fails_only_the_command_that_uses_it_in_one_line(tmp_path: Path) -> None:
    bad = {"SPARK_MASTER_PORT": "abc", "FLINK_REST_PORT": "80x", "LAKEFLOW_HOME": str(tmp_path)}
    query = lakeflow("query", "--local", **bad)  # no compacted table: query's own answer, exit 2
    assert query.returncode == 2, query.stderr
    assert "Traceback" not in query.stderr and "PORT" not in query.stderr
    assert "make compact" in query.stderr
    spark = lakeflow("spark", "up", **bad)
    assert spark.returncode == 2
    assert spark.stderr.splitlines() == [
        "lakeflow spark: invalid process settings: SPARK_MASTER_PORT='abc': expected a port number (0 to 65535)"
    ]
    printed = lakeflow("compact", "--print-command", **bad)  # its default master is $SPARK_MASTER_PORT's
    assert printed.returncode == 2 and printed.stderr.splitlines() == [
        "lakeflow compact: invalid process settings: SPARK_MASTER_PORT='abc': expected a port number (0 to 65535)"
    ]
    status = lakeflow("flink", "status", **bad)  # reads no port: not refused for FLINK_REST_PORT
    assert status.returncode == 1 and status.stdout.strip() == "not running", status.stderr
    assert lakeflow("spark", "up", "--help", **bad).returncode == 0
    for help_of in ((), ("compact",), ("flink", "up")):  # the root's and others' help read no setting either
        shown = lakeflow(*help_of, "--help", **bad)
        assert shown.returncode == 0 and shown.stdout.startswith(f"usage: {' '.join(['lakeflow', *help_of])} ")
