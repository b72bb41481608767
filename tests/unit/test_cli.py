"""The ``lakeflow`` parsers: docs/cli.md is generated from them and current; building them reads no
setting, so a bad value fails only the command that uses it, in one line naming the variable.

Unit tests: they start no process. The real-process tests: tests/integration/test_cli.py."""

from __future__ import annotations

import argparse
import importlib
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from lakeflow.cli import reference as cli_reference
from lakeflow.cli.env_example import sections
from lakeflow.cli import main as cli_main
from lakeflow.cli.main import COMMAND_MODULES, build_parser
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


def test_each_command_module_registers_the_commands_it_is_listed_with() -> None:
    for module, commands in COMMAND_MODULES.items():
        sub = argparse.ArgumentParser().add_subparsers()
        importlib.import_module(module).register(sub)
        assert tuple(sub.choices) == commands, module


def test_a_command_named_imports_its_own_module_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """A command's start-up is its own module's imports (`lakeflow harvest` none of compaction's);
    without a command lakeflow knows, every module is imported (the whole --help, argparse's error)."""
    imported: list[str] = []
    real = importlib.import_module

    def recording(name: str, package: str | None = None):
        imported.append(name)
        return real(name, package)

    monkeypatch.setattr(importlib, "import_module", recording)
    args = cli_main._command_parser(["-v", "harvest"]).parse_args(["-v", "harvest", "--rest-url", "http://jm:8081"])
    assert imported == ["lakeflow.cli.lineage"]
    assert (args.command, args.rest_url, args.verbose) == ("harvest", "http://jm:8081", True)
    imported.clear()
    cli_main._command_parser(["--verbose", "harvset"])
    assert imported == list(COMMAND_MODULES)


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


def test_a_library_missing_from_this_environment_is_one_line_naming_the_one_that_has_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from lakeflow.cli.main import run_command
    from lakeflow.runtime import homes

    other = tmp_path / "other-venv"
    (other / "bin").mkdir(parents=True)
    (other / "bin" / "lakeflow").write_text("")
    (other / "lib" / "python3.11" / "site-packages" / "pycurl.cpython-311-x86_64-linux-gnu.so").parent.mkdir(parents=True)
    (other / "lib" / "python3.11" / "site-packages" / "pycurl.cpython-311-x86_64-linux-gnu.so").write_bytes(b"")
    monkeypatch.setattr(homes, "COMMAND_VENV", other)

    def harvest() -> int:
        import pycurl_is_not_here  # noqa: F401  (stands for a library of the other environment)

        return 0

    def needs_pycurl() -> int:
        raise ModuleNotFoundError("No module named 'pycurl'", name="pycurl")

    assert run_command("lakeflow harvest", needs_pycurl) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"lakeflow harvest: needs pycurl, which this environment ({sys.prefix}) does not have: "
        f"run it with the environment that has it: {other / 'bin' / 'lakeflow'} harvest"
    ]
    assert run_command("lakeflow harvest", harvest) == 2  # in neither environment: how to get it
    assert capsys.readouterr().err.splitlines() == [
        f"lakeflow harvest: needs pycurl_is_not_here, which this environment ({sys.prefix}) does not have: "
        "install lakeflow with the extra that provides it (docs/environments.md)"
    ]

    def broken_lakeflow() -> int:
        raise ModuleNotFoundError("No module named 'lakeflow.gone'", name="lakeflow.gone")

    with pytest.raises(ModuleNotFoundError):  # lakeflow's own module missing is a bug: its traceback
        run_command("lakeflow harvest", broken_lakeflow)
