"""Where the engines are: the Flink distribution inside the apache-flink wheel and the Spark one
inside the pyspark wheel, found without importing either (importing pyspark costs 0.5 s)."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"{name} is not installed in this environment: make install")
    return Path(spec.submodule_search_locations[0]).resolve()


def flink_home() -> Path:
    """The Flink distribution inside the installed apache-flink wheel (``…/pyflink``)."""
    return _package_dir("pyflink")


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
        wheel: Path | None = _package_dir("pyflink")
    except FileNotFoundError:
        wheel = None
    return Path(home) if home and Path(home).resolve() != wheel else None


def spark_home() -> Path:
    """The installed pyspark package: a complete SPARK_HOME."""
    return _package_dir("pyspark")
