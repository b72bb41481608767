"""A newcomer's commands in any order: the suite passes beside the state the README's commands leave
(``.lakeflow/`` of ``make compact``, a ``.env.local``, exported settings), and each ``lakeflow`` command
of the ingestion environment either works or says in one line which environment has what it needs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.fixtures_compaction import json_array, make_home, readings

ROOT = Path(__file__).resolve().parents[2]
INGESTION_LAKEFLOW = ROOT / ".venv-flink" / "bin" / "lakeflow"
# the unit tests that read a lakeflow home's lineage store, local catalog or settings
HOME_READERS = [
    "tests/unit/test_harvest_config.py",
    "tests/unit/test_harvest_recorded.py",
    "tests/unit/test_harvest_state.py",
    "tests/unit/test_lineage_view.py",
    "tests/unit/test_openlineage.py",
    "tests/unit/test_query.py",
    "tests/unit/test_settings.py",
]


def test_the_home_readers_pass_beside_a_populated_lakeflow_folder_and_settings(tmp_path: Path) -> None:
    checkout = tmp_path / "checkout"
    home = make_home(checkout)  # the raw table in ./lakeflow-home, compacted below as make compact does
    (home.raw / "part-0-0.json").write_text(json_array(readings("r1", 50, start_ms=1_700_000_000_000)))
    env = {**home.env, "LAKEFLOW_ENV_FILE": str(checkout / ".env.local")}
    compacted = subprocess.run([sys.executable, "-m", "lakeflow.cli", "compact", "--engine", "arrow"], env=env,
                               cwd=checkout, capture_output=True, text=True, timeout=300)
    assert compacted.returncode == 0, compacted.stderr
    (checkout / ".lakeflow").symlink_to(home.home)  # what the default LAKEFLOW_HOME finds in this folder
    assert sorted(p.name.rsplit("-", 1)[-1] for p in (checkout / ".lakeflow" / "lineage").iterdir()) == [
        "COMPLETE.json", "START.json"]
    (checkout / ".env.local").write_text(
        "LAKEKEEPER=http://127.0.0.1:9\nWAREHOUSE_ID=nowhere\nSOURCE=kafka\nKAFKA_BOOTSTRAP_SERVERS=127.0.0.1:9\n"
        "KAFKA_TOPIC=elsewhere\nNAMESPACE=other\nTABLE=other\nCOMPACT_ENGINE=spark\n")
    exported = {k: v for k, v in os.environ.items() if not k.startswith("LAKEFLOW_")}
    exported.update({"LINEAGE_DIR": str(checkout / ".lakeflow" / "lineage"), "TABLE": "exported",
                     "NUM_RECORDS": "7", "PYTHONPATH": str(ROOT)})
    suite = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                            *(str(ROOT / t) for t in HOME_READERS)],
                           env=exported, cwd=checkout, capture_output=True, text=True, timeout=900)
    assert suite.returncode == 0, suite.stdout[-4000:]
    assert " passed" in suite.stdout.splitlines()[-1] and "failed" not in suite.stdout.splitlines()[-1]


def test_each_command_of_the_ingestion_environment_works_or_names_the_one_that_has_what_it_needs(
    tmp_path: Path,
) -> None:
    assert INGESTION_LAKEFLOW.exists(), "make install creates .venv-flink"
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEFLOW_")}
    env.update({"LAKEFLOW_HOME": str(tmp_path / "home"), "LAKEFLOW_ENV_FILE": os.devnull})
    compaction_lakeflow = ROOT / ".venv" / "bin" / "lakeflow"
    for command in (["harvest", "--rest-url", "http://127.0.0.1:9"], ["query", "--local"],
                    ["compact", "--engine", "spark"], ["lineage", "view", "--output", str(tmp_path / "l.html")]):
        done = subprocess.run([str(INGESTION_LAKEFLOW), *command], env=env, cwd=tmp_path, capture_output=True,
                              text=True, timeout=300)
        if done.returncode == 0:
            continue
        assert "Traceback" not in done.stderr, (command, done.stderr)
        assert done.returncode == 2, (command, done.stderr)
        last = done.stderr.strip().splitlines()[-1]
        assert last.startswith(f"lakeflow {command[0]}"), (command, done.stderr)
        if "which this environment" in last:
            assert f"run it with the environment that has it: {compaction_lakeflow} {command[0]}" in last, last
