"""The one exception hierarchy: every error lakeflow raises derives from :class:`LakeflowError`,
whose ``exit_code`` the ``lakeflow`` command exits with after printing its message on one line.

A leaf: imports nothing of lakeflow, so every module (the runtime layer included) may use it.
"""

from __future__ import annotations


class LakeflowError(Exception):
    """A failure lakeflow explains in its message; the command exits with ``exit_code``."""

    exit_code: int = 2


class ConfigurationError(LakeflowError):
    """Bad input: a setting, recipe, flag or file is missing or malformed; the message names it."""


class ServiceUnavailable(LakeflowError):
    """A service lakeflow calls (a catalog, a REST API) did not answer, or not usably."""
