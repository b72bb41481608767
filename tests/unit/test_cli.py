"""The ``lakeflow`` parsers: docs/cli.md is generated from them and current; building them reads no
setting, so a bad value fails only the command that uses it, in one line naming the variable.

Unit tests: they start no process. The real-process tests: tests/integration/test_cli.py."""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from lakeflow.cli import reference as cli_reference
from lakeflow.cli.env_example import sections
from lakeflow.cli.main import build_parser
from lakeflow.settings.env import variables

ROOT = Path(__file__).resolve().parents[2]


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
