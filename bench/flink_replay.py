"""A JobManager of N jobs for ``make bench-harvest``: the answers recorded from real Flink 2.3
(``tests/fixtures/harvest/cluster``, 7 jobs) replayed round after round, every job with a new id
and every round's jobs with new names (``harvest-batch`` → ``harvest-batch-0042``), served by the
REST stub (:mod:`tests.standins.flink_rest`) over a real socket.

Run as its own process (so that its CPU is not the harvester's)::

    python bench/flink_replay.py 1000    # prints the URL, serves until stdin closes
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.standins.flink_rest import Answer, FlinkRestStub  # noqa: E402

RECORDING = ROOT / "tests" / "fixtures" / "harvest" / "cluster"


def answers(jobs: int, recording: Path = RECORDING) -> dict[str, tuple[int, bytes]]:
    """path → (status, body) of a JobManager holding ``jobs`` jobs replayed from ``recording``."""
    index = json.loads((recording / "index.json").read_text())
    bodies = {path: json.loads((recording / entry["file"]).read_text()) for path, entry in index.items()}
    recorded = sorted(bodies["/jobs/overview"]["jobs"], key=lambda j: (j["name"], j["start-time"]))
    out: dict[str, tuple[int, bytes]] = {"/config": (200, json.dumps(bodies["/config"]).encode())}
    overview = []
    for n in range(jobs):
        job = recorded[n % len(recorded)]
        old = {job["jid"]: hashlib.md5(f"{job['jid']}-{n}".encode()).hexdigest(),
               job["name"]: f"{job['name']}-{n // len(recorded):04d}"}
        overview.append(_renamed(job, old))
        for path, entry in index.items():
            if f"/jobs/{job['jid']}" in path:
                out[path.replace(job["jid"], old[job["jid"]])] = (
                    entry.get("status", 200), json.dumps(_renamed(bodies[path], old)).encode())
    out["/jobs/overview"] = (200, json.dumps({"jobs": overview}).encode())
    return out


def _renamed(value: Any, old: dict[str, str]) -> Any:
    """``value`` with every string that is a key of ``old`` (a job id or name) replaced."""
    if isinstance(value, dict):
        return {k: _renamed(v, old) for k, v in value.items()}
    if isinstance(value, list):
        return [_renamed(v, old) for v in value]
    return old.get(value, value) if isinstance(value, str) else value


def main() -> int:
    stub = FlinkRestStub()
    for path, (status, body) in answers(int(sys.argv[1])).items():
        stub.route(path, Answer(status, body))
    stub.start()
    print(stub.url, flush=True)
    sys.stdin.read()  # until the benchmark closes our stdin
    stub.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
