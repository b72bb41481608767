"""Where the engines and the job environments are: the Flink distribution inside the apache-flink
wheel and the Spark one inside the pyspark wheel, found without importing either (importing
pyspark costs 0.5 s).

Each job has its own environment (docs/environments.md): in a checkout, ``.venv`` (the compaction
job's, with the ``lakeflow`` command) has no pyflink, so the Flink distribution is the one of the
ingestion environment ``.venv-flink`` — whose Python runs the ingestion job."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
INGESTION_VENV = REPO / ".venv-flink"  # make install; the ingestion job's environment in a checkout
COMMAND_VENV = REPO / ".venv"  # make install; the compaction job's environment + the lakeflow command


def _package(name: str) -> Path | None:
    """The folder of package ``name`` installed here, else None — also for a folder of that name left in
    site-packages (``pyflink/plugins/`` a plugin was copied into outlives the wheel's uninstall)."""
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None or not spec.submodule_search_locations:
        return None  # origin None: a namespace package, i.e. no __init__.py
    return Path(spec.submodule_search_locations[0]).resolve()


def _package_dir(name: str) -> Path:
    folder = _package(name)
    if folder is None:
        raise FileNotFoundError(f"{name} is not installed in this environment: make install")
    return folder


def ingestion_python() -> Path:
    """The Python of the ingestion job's environment: this one when it has pyflink, else ``.venv-flink``'s."""
    if _package("pyflink"):
        return Path(sys.executable)
    return INGESTION_VENV / "bin" / "python"


def lakeflow_script() -> Path:
    """The ``lakeflow`` command whose environment runs the commands (compaction, query, harvest): the
    one beside this interpreter, except in the ingestion environment of a checkout: ``.venv``'s."""
    command_venv_script = COMMAND_VENV / "bin" / "lakeflow"
    if _package("pyflink") and command_venv_script.exists():
        return command_venv_script
    return Path(sys.executable).parent / "lakeflow"


def environment_with(module: str) -> Path | None:
    """The ``lakeflow`` command of the checkout's environment (``.venv`` or ``.venv-flink``, this one
    excluded) that has the top-level ``module`` installed; None when neither has it."""
    here = Path(sys.prefix).resolve()
    for venv in (COMMAND_VENV, INGESTION_VENV):
        script = venv / "bin" / "lakeflow"
        if venv.resolve() == here or not script.exists():
            continue
        for site in venv.glob("lib/python3*/site-packages"):
            if (
                (site / module / "__init__.py").exists()
                or any(site.glob(f"{module}.*py"))
                or any(site.glob(f"{module}.*.so"))
            ):
                return script
    return None


def flink_home() -> Path:
    """The Flink distribution inside the apache-flink wheel (``…/pyflink``): this environment's, else
    the ingestion environment's (``.venv-flink``)."""
    try:
        return _package_dir("pyflink")
    except FileNotFoundError:
        found = sorted(INGESTION_VENV.glob("lib/python3*/site-packages/pyflink"))
        if not found:
            raise FileNotFoundError(
                f"pyflink is neither in this environment nor in {INGESTION_VENV}: make install"
            ) from None
        return found[0].resolve()


def flink_plugins_dir() -> Path:
    """The plugin folder Flink loads: ``$FLINK_PLUGINS_DIR``, else the wheel's ``pyflink/plugins``.

    PyFlink itself overwrites ``FLINK_PLUGINS_DIR`` with the wheel's folder when it starts its
    gateway JVM unless ``FLINK_HOME`` is set too: an in-process job (``make run``) loads plugins
    from ``pyflink/plugins`` whatever this variable says."""
    if os.environ.get("FLINK_PLUGINS_DIR"):
        return Path(os.environ["FLINK_PLUGINS_DIR"])
    return flink_home() / "plugins"


def flink_distribution() -> Path | None:
    """``$FLINK_HOME`` when it names a Flink distribution other than the wheel's own (PyFlink sets
    ``FLINK_HOME`` to the wheel's, which has no ``opt/`` plugins)."""
    home = os.environ.get("FLINK_HOME")
    try:
        wheel: Path | None = flink_home()
    except FileNotFoundError:
        wheel = None
    return Path(home) if home and Path(home).resolve() != wheel else None


def spark_home() -> Path:
    """The installed pyspark package: a complete SPARK_HOME."""
    return _package_dir("pyspark")
