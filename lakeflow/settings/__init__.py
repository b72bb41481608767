"""Settings: the environment over ``.env.local`` (the environment wins) → typed, frozen models.

:mod:`lakeflow.settings.env` is the layer every area loads its variables through;
:mod:`lakeflow.settings.core` holds lakeflow's own :class:`Settings`; ``python -m lakeflow.cli.env_example``
writes ``.env.example`` from the models' field descriptions.
"""

from lakeflow.settings.core import DEFAULT_LAKEKEEPER, Settings, load_settings
from lakeflow.settings.env import SettingsError, environment, is_uuid

__all__ = ["DEFAULT_LAKEKEEPER", "Settings", "SettingsError", "environment", "is_uuid", "load_settings"]
