"""``make test-fast`` starts no JVM: every test not marked ``slow`` runs with ``JAVA_TOOL_OPTIONS``
naming a log file per JVM (``-Xlog:…:file=…-%p.log``, created by any HotSpot JVM at start, even
with nothing to log), and fails when one appeared — in this process or a child that inherited
the environment."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _no_jvm_unless_slow(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
                        monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    if request.node.get_closest_marker("slow"):
        yield
        return
    starts = tmp_path_factory.mktemp("jvm-starts")
    own = os.environ.get("JAVA_TOOL_OPTIONS", "")
    monkeypatch.setenv("JAVA_TOOL_OPTIONS", f"{own} -Xlog:os=off:file={starts}/jvm-%p.log".strip())
    yield
    started = sorted(p.name for p in Path(starts).iterdir())
    assert not started, f"{request.node.nodeid} is not marked slow but started {len(started)} JVM(s): mark it slow"
