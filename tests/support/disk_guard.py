"""The integration tests stop before the first one when the disk of their temporary files has too little
room: Flink and Spark unpack the jobs' environments there (about 1 GiB per job), and a full disk
shows up as a dozen unrelated failures (a Flink blob upload's "Broken pipe") half an hour in."""

from __future__ import annotations

import shutil
import tempfile

import pytest

MIN_FREE_GIB = 10.0  # a whole run peaks at ~8 GB there (docs/benchmarks.md)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not any("integration" in item.path.parts for item in items):
        return
    folder = tempfile.gettempdir()  # where pytest puts tmp_path, so the clusters' homes
    free_gib = shutil.disk_usage(folder).free / 2**30
    if free_gib < MIN_FREE_GIB:
        pytest.exit(
            f"{free_gib:.1f} GiB free on the disk of {folder}; the integration tests need {MIN_FREE_GIB:.0f} GiB "
            "there: free some space, or set TMPDIR to a folder on a disk that has it",
            returncode=pytest.ExitCode.USAGE_ERROR,
        )
