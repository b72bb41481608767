"""One exception hierarchy: every exception class lakeflow defines derives from ``LakeflowError``,
and the ``lakeflow`` command turns one into its message on stderr and its exit code."""

from __future__ import annotations

import argparse
import ast
import importlib
import inspect
from pathlib import Path

import pytest

from lakeflow.cli import main as cli
from lakeflow.errors import ConfigurationError, LakeflowError, ServiceUnavailable

PACKAGE = Path(__file__).resolve().parents[2] / "lakeflow"


def defined_exceptions() -> dict[str, type[BaseException]]:
    """Every exception class defined in lakeflow/ (nested ones included), by qualified name: the
    classes the source declares (ast), looked up in their imported module (inspect)."""
    found: dict[str, type[BaseException]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "__main__.py":
            continue
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        classes = [n.name for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.ClassDef)]
        if not classes:
            continue
        module = importlib.import_module(name)
        for cls_name in classes:
            cls = getattr(module, cls_name, None)
            if inspect.isclass(cls) and issubclass(cls, BaseException):
                found[f"{name}.{cls_name}"] = cls
    return found


def test_every_exception_class_derives_from_lakeflow_error() -> None:
    found = defined_exceptions()
    assert {"lakeflow.catalog.errors.CatalogError", "lakeflow.settings.env.SettingsError",
            "lakeflow.lineage.flink_rest.FlinkRestError", "lakeflow.runtime.jars.JarsUnavailable"} <= set(found)
    stray = sorted(name for name, cls in found.items() if not issubclass(cls, LakeflowError))
    assert stray == [], f"exception classes not derived from lakeflow.errors.LakeflowError: {stray}"


def test_the_intermediate_classes_say_what_kind_of_failure() -> None:
    from lakeflow.catalog.errors import CatalogUnavailable
    from lakeflow.compaction.lease import CompactionBusy
    from lakeflow.demo import DemoFailed
    from lakeflow.http import AnswerRefused
    from lakeflow.lineage.config import ConfigError
    from lakeflow.settings import SettingsError

    assert issubclass(SettingsError, ConfigurationError) and issubclass(SettingsError, ValueError)
    assert issubclass(ConfigError, ConfigurationError) and issubclass(ConfigError, ValueError)
    assert issubclass(CatalogUnavailable, ServiceUnavailable) and issubclass(AnswerRefused, ServiceUnavailable)
    codes = {cls.__name__: cls("x").exit_code for cls in (SettingsError, CatalogUnavailable, CompactionBusy, DemoFailed)}
    assert codes == {"SettingsError": 2, "CatalogUnavailable": 2, "CompactionBusy": 3, "DemoFailed": 1}


@pytest.mark.parametrize("error, code", [
    ("lakeflow.settings.env.SettingsError", 2),
    ("lakeflow.catalog.errors.TableNotFound", 2),
    ("lakeflow.lineage.flink_rest.FlinkRestError", 2),
    ("lakeflow.compaction.lease.CompactionBusy", 3),
    ("lakeflow.demo.DemoFailed", 1),
])
def test_the_cli_maps_a_lakeflow_error_to_its_line_and_exit_code(error, code, monkeypatch, capsys) -> None:
    module, _, name = error.rpartition(".")
    cls = getattr(importlib.import_module(module), name)

    def parser() -> argparse.ArgumentParser:
        root = argparse.ArgumentParser(prog="lakeflow")
        root.add_argument("-v", "--verbose", action="store_true")
        sub = root.add_subparsers(dest="command", required=True)

        def fail(_: argparse.Namespace) -> int:
            raise cls("the table t.u: nothing there")

        sub.add_parser("probe").set_defaults(handler=fail)
        return root

    monkeypatch.setattr(cli, "build_parser", parser)
    assert cli.main(["probe"]) == code
    refused = "refused: " if code == 3 else ""  # another compaction holds the lease
    assert capsys.readouterr().err == f"lakeflow probe: {refused}the table t.u: nothing there\n"


def test_an_error_outside_the_hierarchy_is_not_swallowed(monkeypatch) -> None:
    def parser() -> argparse.ArgumentParser:
        root = argparse.ArgumentParser(prog="lakeflow")
        root.add_argument("-v", "--verbose", action="store_true")
        sub = root.add_subparsers(dest="command", required=True)
        sub.add_parser("probe").set_defaults(handler=lambda _: 1 // 0)
        return root

    monkeypatch.setattr(cli, "build_parser", parser)
    with pytest.raises(ZeroDivisionError):
        cli.main(["probe"])
