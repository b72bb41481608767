"""The integration tests refuse to start on a disk without room for their temporary files
(:mod:`tests.support.disk_guard`)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.support import disk_guard


def _free(monkeypatch: pytest.MonkeyPatch, gib: float) -> None:
    monkeypatch.setattr(disk_guard.shutil, "disk_usage", lambda _: SimpleNamespace(free=int(gib * 2**30)))


def _items(*paths: str) -> Any:
    return [SimpleNamespace(path=Path(p)) for p in paths]


def test_a_run_with_integration_tests_stops_at_once_on_a_full_disk(monkeypatch: pytest.MonkeyPatch) -> None:
    _free(monkeypatch, 1.5)
    with pytest.raises(pytest.exit.Exception) as stopped:
        disk_guard.pytest_collection_modifyitems(None, _items("tests/unit/test_a.py", "tests/integration/test_b.py"))
    assert stopped.value.returncode == pytest.ExitCode.USAGE_ERROR
    assert str(stopped.value).startswith("1.5 GiB free on the disk of ") and "set TMPDIR" in str(stopped.value)


def test_unit_tests_alone_and_a_disk_with_room_go_on(monkeypatch: pytest.MonkeyPatch) -> None:
    _free(monkeypatch, 1.5)
    disk_guard.pytest_collection_modifyitems(None, _items("tests/unit/test_a.py"))
    _free(monkeypatch, disk_guard.MIN_FREE_GIB + 0.1)
    disk_guard.pytest_collection_modifyitems(None, _items("tests/integration/test_b.py"))
