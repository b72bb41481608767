"""Where lakeflow's environments are (:mod:`lakeflow.runtime.homes`): the ``lakeflow`` command the
jobs and commands print for the next step."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from lakeflow.cli.output import shown
from lakeflow.runtime import homes


def _with_pyflink(monkeypatch: pytest.MonkeyPatch, site: Path, present: bool) -> None:
    """``site`` first on sys.path, holding the apache-flink wheel's package (``present``) or only the
    ``pyflink/plugins/`` folder a plugin copied into it leaves behind after the wheel's uninstall."""
    package = site / "pyflink"
    (package / "plugins" / "s3-fs-hadoop").mkdir(parents=True, exist_ok=True)
    if present:
        (package / "__init__.py").write_text("")
    else:
        (package / "__init__.py").unlink(missing_ok=True)
    monkeypatch.syspath_prepend(str(site))  # invalidates the import caches


def test_the_ingestion_environment_of_a_checkout_points_to_the_command_venv(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    script = tmp_path / ".venv" / "bin" / "lakeflow"
    script.parent.mkdir(parents=True)
    script.write_text("#!/bin/sh\n")
    monkeypatch.setattr(homes, "COMMAND_VENV", tmp_path / ".venv")
    _with_pyflink(monkeypatch, tmp_path / "site", present=True)
    assert homes.lakeflow_script() == script
    monkeypatch.chdir(tmp_path)
    assert shown("query") == ".venv/bin/lakeflow query"


def test_elsewhere_the_command_beside_this_interpreter(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    beside = Path(sys.executable).parent / "lakeflow"
    monkeypatch.setattr(homes, "COMMAND_VENV", tmp_path / "no-venv")
    _with_pyflink(monkeypatch, tmp_path / "site", present=True)  # an ingestion environment outside a checkout (a cluster)
    assert homes.lakeflow_script() == beside
    (tmp_path / "no-venv" / "bin").mkdir(parents=True)
    (tmp_path / "no-venv" / "bin" / "lakeflow").write_text("#!/bin/sh\n")
    _with_pyflink(monkeypatch, tmp_path / "site", present=False)  # the compaction environment
    assert homes.lakeflow_script() == beside


def test_a_pyflink_folder_left_behind_is_not_the_flink_distribution(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A plugin copied into the wheel's ``plugins/`` outlives ``pip uninstall apache-flink``: the
    distribution is then the ingestion environment's, and this Python is not the ingestion job's."""
    ingestion = tmp_path / ".venv-flink"
    (ingestion / "lib" / "python3.11" / "site-packages" / "pyflink" / "bin").mkdir(parents=True)
    monkeypatch.setattr(homes, "INGESTION_VENV", ingestion)
    _with_pyflink(monkeypatch, tmp_path / "site", present=False)
    assert homes.flink_home() == ingestion / "lib" / "python3.11" / "site-packages" / "pyflink"
    assert homes.ingestion_python() == ingestion / "bin" / "python"
    _with_pyflink(monkeypatch, tmp_path / "site", present=True)
    assert homes.flink_home() == (tmp_path / "site" / "pyflink").resolve()
    assert homes.ingestion_python() == Path(sys.executable)
