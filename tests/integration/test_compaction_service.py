"""The compactor as a service, as a user runs it: ``lakeflow compact --every`` (with
``--maintain-every``), ``lakeflow status`` and ``lakeflow query`` as real processes on a table of
the embedded catalog — new raw files compacted between ticks, SIGTERM during a run (the run
commits, exit 0) and while sleeping, a held lease logged and waited out, maintenance on its
schedule, and the backlog and freshness lag ``status`` reports before and after.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable

import pytest

from tests.support.fixtures_compaction import LakeflowHome, make_home, readings, write_parts

LAKEFLOW = Path(sys.executable).parent / "lakeflow"
DAY_MS = 1763683200000  # 2025-11-21T00:00:00Z
TARGET = "sensor-readings-compacted"


def lakeflow(home: LakeflowHome, *args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([str(LAKEFLOW), *args], env=home.env, cwd=home.home, text=True, capture_output=True,
                          timeout=timeout)


def start_service(home: LakeflowHome, *args: str) -> subprocess.Popen:
    """``lakeflow compact --every …`` in a process of its own; its stdout (one line per run) on a pipe."""
    return subprocess.Popen([str(LAKEFLOW), "compact", "--engine", "arrow", *args], env=home.env, cwd=home.home,
                            text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


class Lines:
    """The service's stdout, line by line as it comes (a thread reads the pipe)."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc, self.seen = proc, []
        self._queue: queue.Queue[str] = queue.Queue()
        self.all: list[str] = []
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        for line in self.proc.stdout:
            self._queue.put(line.rstrip("\n"))

    def wait_for(self, match: Callable[[str], bool], timeout: float = 120) -> str:
        deadline = time.monotonic() + timeout
        while True:
            for line in self.seen:
                if match(line):
                    self.seen.remove(line)
                    return line
            try:
                line = self._queue.get(timeout=max(0.0, min(0.5, deadline - time.monotonic())))
                self.seen.append(line)
                self.all.append(line)
            except queue.Empty:
                assert self.proc.poll() is None, f"service exited {self.proc.returncode}: {self.all}"
                if time.monotonic() >= deadline:
                    raise AssertionError(f"no such line within {timeout} s; seen {self.all}") from None

    def skip(self) -> None:
        """Forget the lines written so far."""
        while not self._queue.empty():
            self.all.append(self._queue.get())
        self.seen.clear()

    def rest(self) -> str:
        """The remaining output, once the process has ended."""
        self.proc.wait()
        time.sleep(0.2)
        self.skip()
        return "\n".join(self.all)


def deliver(home: LakeflowHome, rows: list[dict], per_file: int) -> None:
    """Part files into a new hour bucket at once (the folder renamed in), as a run may tick meanwhile."""
    staging = home.home / "staging"
    for folder in write_parts(staging, rows, per_file, bucket_folders=True)[0].parent.parent.iterdir():
        folder.rename(home.raw / folder.name)


def runs_with(files: int) -> Callable[[str], bool]:
    return lambda line: f" files {files} " in line and line.split()[1] == "run"


def count_rows(home: LakeflowHome) -> int:
    done = lakeflow(home, "query", "--format", "json", "SELECT count(*) AS n FROM readings")
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)[0]["n"]


def status(home: LakeflowHome) -> dict:
    done = lakeflow(home, "status", "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def stop(lines: Lines, timeout: float = 120) -> tuple[int, str]:
    """SIGTERM; the exit code and all of stdout."""
    lines.proc.send_signal(signal.SIGTERM)
    lines.proc.wait(timeout=timeout)
    return lines.proc.returncode, lines.rest()


@pytest.fixture
def home(tmp_path: Path) -> LakeflowHome:
    return make_home(tmp_path)


def test_every_compacts_new_files_each_tick_maintains_on_schedule_and_stops_on_sigterm(home: LakeflowHome) -> None:
    write_parts(home.raw, readings("run-a", 300, start_ms=DAY_MS, step_ms=1000), 30, bucket_folders=True)
    proc = start_service(home, "--every", "1s", "--maintain-every", "4s")
    try:
        lines = Lines(proc)
        first = lines.wait_for(runs_with(10))
        assert first.endswith(" ok maintained") and " rows 300 " in first
        for n in range(3):  # three more batches into the same day, each its own run and data file
            deliver(home, readings(f"run-{n}", 100, start_ms=DAY_MS + (n + 1) * 3_600_000), 25)
            line = lines.wait_for(runs_with(4))
            assert " rows 100 " in line and " ok" in line, line
        assert count_rows(home) == 600
        lines.skip()  # a maintenance after the last batch merges the day's four files
        lines.wait_for(lambda line: line.endswith(" maintained") and " files 0 " in line, timeout=60)
        after = status(home)
        assert after["pending_files"] == 0 and after["freshness_lag_s"] == 0
        assert [(p["name"], p["files"]) for p in after["partitions"]] == [("ts_day=2025-11-21", 1)]  # merged
        assert after["rows"] == 600 and after["last_run"]["result"] == "COMPLETE"
        lines.skip()
        lines.wait_for(runs_with(0))          # a tick's run has just ended: the next is ~1 s away
        code, out = stop(lines, timeout=30)   # between runs: at once
    finally:
        proc.kill()
    assert code == 0, proc.stderr.read()[-2000:]
    assert "SIGTERM: exiting" in out
    assert count_rows(home) == 600


def test_sigterm_during_a_run_lets_it_commit_then_exits_0(home: LakeflowHome) -> None:
    write_parts(home.raw, readings("run-a", 6000, start_ms=DAY_MS, step_ms=500), 4, bucket_folders=True)
    intents = home.home / "iceberg" / "iot" / TARGET / "_lakeflow" / "compaction"
    proc = start_service(home, "--every", "1s")
    try:
        deadline = time.monotonic() + 120
        while True:  # an intent is written once the run found its new files, removed after its commit
            assert time.monotonic() < deadline and proc.poll() is None, "the run never started"
            if list(intents.glob("intent-*.json")):
                proc.send_signal(signal.SIGSTOP)
                if list(intents.glob("intent-*.json")):
                    break  # stopped mid-run
                proc.send_signal(signal.SIGCONT)
            time.sleep(0.01)
        proc.send_signal(signal.SIGTERM)
        proc.send_signal(signal.SIGCONT)
        out, err = proc.communicate(timeout=180)
    finally:
        proc.kill()
    assert proc.returncode == 0, err[-3000:]
    assert "SIGTERM: finishing the run in progress, then exiting" in out
    runs = [line for line in out.splitlines() if line.split()[1:2] == ["run"]]
    assert len(runs) == 1 and " files 1500 rows 6000 " in runs[0] and runs[0].endswith(" ok"), out
    assert not list(intents.glob("intent-*.json"))
    assert count_rows(home) == 6000


def test_a_held_lease_is_a_log_line_and_the_next_tick_compacts(home: LakeflowHome) -> None:
    from lakeflow.compaction.commit import iceberg_catalog, open_target
    from lakeflow.compaction.config import load_config
    from lakeflow.compaction.lease import Lease

    config = load_config(env=home.env)  # the test holds the lease as another compactor would
    target = open_target(iceberg_catalog(config.settings), config.namespace, config.target_table,
                         f"file://{home.raw}", config.schema)
    write_parts(home.raw, readings("run-a", 100, start_ms=DAY_MS), 10, bucket_folders=True)
    with Lease(target.storage, "someone-else", config.target_name, 30):
        proc = start_service(home, "--every", "1s")
        lines = Lines(proc)
        try:
            busy = lines.wait_for(lambda line: "busy" in line)
            assert " files 0 " in busy
            lines.wait_for(lambda line: "busy" in line)  # the loop goes on
        except BaseException:
            proc.kill()
            raise
    try:
        lines.wait_for(runs_with(10))
        code, _ = stop(lines)
    finally:
        proc.kill()
    assert code == 0 and "refused" in proc.stderr.read()
    assert count_rows(home) == 100


def test_status_reports_the_backlog_its_age_and_the_table(home: LakeflowHome) -> None:
    write_parts(home.raw, readings("run-a", 200, start_ms=DAY_MS, step_ms=60_000), 20, bucket_folders=True)
    ten_minutes_ago = time.time() - 600
    oldest = sorted(home.raw.rglob("*.json"))[0]
    os.utime(oldest, (ten_minutes_ago, ten_minutes_ago))
    before = status(home)
    assert (before["exists"], before["pending_files"], before["snapshots"]) == (False, 10, 0)
    assert before["oldest_pending"] == oldest.relative_to(home.raw).as_posix()
    assert 600 <= before["freshness_lag_s"] < 900
    text = lakeflow(home, "status").stdout
    assert "pending: 10 raw file(s)" in text and "freshness lag 10 min" in text and "not created yet" in text

    done = lakeflow(home, "compact", "--engine", "arrow")
    assert done.returncode == 0, done.stderr[-2000:]
    write_parts(home.raw, readings("run-b", 40, start_ms=DAY_MS + 86_400_000, step_ms=60_000), 20,
                bucket_folders=True)
    after = status(home)
    assert after["pending_files"] == 2 and after["freshness_lag_s"] < 120
    assert after["last_run"]["result"] == "COMPLETE" and after["last_run"]["files_in"] == 10
    assert after["last_commit"]["rows_out"] == 200 and after["snapshots"] == 1 and after["rows"] == 200
    assert [(p["name"], p["files"]) for p in after["partitions"]] == [("ts_day=2025-11-21", 1)]
    assert after["partitions"][0]["mean_bytes"] == after["partitions"][0]["bytes"] > 0  # one file: its size
    text = lakeflow(home, "status").stdout
    assert "ts_day=2025-11-21: 1 file(s), mean" in text and "last run:" in text and "COMPLETE" in text


@pytest.mark.parametrize("args, message", [
    (("--maintain-every", "1h"), "--maintain-every applies only with --every"),
    (("--every", "soon"), "--every 'soon'"),
    (("--every", "1m", "--maintain", "--maintain-every", "1h"), "exclude each other"),
    (("--every", "1m", "--print-command"), "exclude each other"),
])
def test_schedule_errors_exit_2(home: LakeflowHome, args: tuple[str, ...], message: str) -> None:
    done = lakeflow(home, "compact", *args, timeout=60)
    assert done.returncode == 2 and message in done.stderr, done.stderr
