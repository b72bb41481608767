"""Where lakeflow's environments are (:mod:`lakeflow.runtime.homes`): the ``lakeflow`` command the
jobs and commands print for the next step."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from lakeflow.cli.output import shown
from lakeflow.runtime import homes


def _with_pyflink(monkeypatch: pytest.MonkeyPatch, present: bool) -> None:
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        homes.importlib.util,
        "find_spec",
        lambda name, *a: (object() if present else None) if name == "pyflink" else find_spec(name, *a),
    )


def test_the_ingestion_environment_of_a_checkout_points_to_the_command_venv(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    script = tmp_path / ".venv" / "bin" / "lakeflow"
    script.parent.mkdir(parents=True)
    script.write_text("#!/bin/sh\n")
    monkeypatch.setattr(homes, "COMMAND_VENV", tmp_path / ".venv")
    _with_pyflink(monkeypatch, present=True)
    assert homes.lakeflow_script() == script
    monkeypatch.chdir(tmp_path)
    assert shown("query") == ".venv/bin/lakeflow query"


def test_elsewhere_the_command_beside_this_interpreter(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    beside = Path(sys.executable).parent / "lakeflow"
    monkeypatch.setattr(homes, "COMMAND_VENV", tmp_path / "no-venv")
    _with_pyflink(monkeypatch, present=True)  # an ingestion environment outside a checkout (a cluster)
    assert homes.lakeflow_script() == beside
    (tmp_path / "no-venv" / "bin").mkdir(parents=True)
    (tmp_path / "no-venv" / "bin" / "lakeflow").write_text("#!/bin/sh\n")
    _with_pyflink(monkeypatch, present=False)  # the compaction environment
    assert homes.lakeflow_script() == beside
