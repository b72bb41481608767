"""Every test runs in a lakeflow home of its own, whatever the checkout and the shell hold.

The README's commands leave state in the checkout (``make run`` and ``make compact`` write
``.lakeflow/``: the local catalog, the warehouse, the lineage store) and a user keeps settings in
``.env.local`` or exports them. None of it may change a test's result: the session starts with
lakeflow's settings variables removed from the environment, ``LAKEFLOW_ENV_FILE`` pointing at no
file, and each test gets ``LAKEFLOW_HOME`` in its own ``tmp_path``. What locates the machine's tools
(JAVA_HOME, the Maven repository, the jar cache) is kept.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

# Variables that say where this machine's tools and caches are: kept (they do not change results).
MACHINE = frozenset({"JAVA_HOME", "MAVEN_REPO", "MVN", "LAKEFLOW_JARS_DIR", "LAKEFLOW_JARS_OFFLINE", "LAKEFLOW_JAR"})
_session_home: Path | None = None


def settings_variables() -> set[str]:
    """Every variable lakeflow's settings models read (the ones .env.example documents)."""
    from lakeflow.cli.env_example import sections
    from lakeflow.settings.env import variables

    return {name for model in sections() for name in variables(model)}


def pytest_configure(config: pytest.Config) -> None:
    global _session_home
    for name in settings_variables() - MACHINE:
        os.environ.pop(name, None)
    os.environ["LAKEFLOW_ENV_FILE"] = os.devnull  # not a file: no dotenv is read, ./.env.local included
    _session_home = Path(tempfile.mkdtemp(prefix="lakeflow-tests-home-"))
    os.environ["LAKEFLOW_HOME"] = str(_session_home)  # session-scoped fixtures' default home


def pytest_unconfigure(config: pytest.Config) -> None:
    if _session_home is not None:
        shutil.rmtree(_session_home, ignore_errors=True)


@pytest.fixture(autouse=True)
def _own_lakeflow_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``LAKEFLOW_HOME`` of the test's own (``tmp_path/lakeflow-home``)."""
    monkeypatch.setenv("LAKEFLOW_HOME", str(tmp_path / "lakeflow-home"))
