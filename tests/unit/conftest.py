"""Unit tests start no process: no JVM, no subprocess, no server but threads of the test process
(``make test-fast``). A test that needs a real process belongs in ``tests/integration/``."""

from __future__ import annotations

import subprocess

import pytest


@pytest.fixture(autouse=True)
def _no_process(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self: subprocess.Popen, args: object, *rest: object, **kwargs: object) -> None:
        raise AssertionError(f"{request.node.nodeid} is a unit test but starts a process ({args!r}): "
                             "move it to tests/integration/")

    monkeypatch.setattr(subprocess.Popen, "__init__", refuse)
