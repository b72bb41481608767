"""The local stack: compose file + Keycloak realm consistency, and ``lakeflow stack bootstrap``
against a Lakekeeper management stand-in and an OAuth2 token stand-in on 127.0.0.1.

The unit tests (no process): tests/unit/test_stack.py.
"""

from __future__ import annotations

import subprocess

from tests.unit.test_stack import ROOT  # noqa: F401 (fixtures, constants)


def test_make_stack_without_docker_says_what_is_missing(tmp_path):
    missing = subprocess.run(["make", "-s", "stack", f"DOCKER={tmp_path / 'docker'}"], cwd=ROOT,
                             capture_output=True, text=True, timeout=60)
    assert missing.returncode == 2 and "not found" in missing.stderr and "docs/stack.md" in missing.stderr
    engine_down = tmp_path / "docker"
    engine_down.write_text("#!/bin/sh\necho 'Cannot connect to the Docker daemon' >&2\nexit 1\n")
    engine_down.chmod(0o755)
    down = subprocess.run(["make", "-s", "stack", f"DOCKER={engine_down}"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert down.returncode == 2 and "no Docker engine answers" in down.stderr
