"""The chaos scenarios' own checks can fail: the tm-kill counter finds a lost, a duplicated and a
partial reading, the tm-kill-fleet counter those of a table and dead letters not as planted, the
executor-kill log reader a rerun task, and a summary line with a non-zero promised count fails the run."""

from __future__ import annotations

import json
from pathlib import Path

from tests.chaos.common import Result
from tests.chaos.fleet_faults import BAD, count_table, letters_as_planted
from tests.chaos.spark_faults import reruns, running_stages
from tests.chaos.tm_kill import count_committed


def write(folder: Path, rel: str, seqs: list[int], run_id: str = "run-1") -> None:
    (folder / rel).parent.mkdir(parents=True, exist_ok=True)
    (folder / rel).write_text(json.dumps([{"run_id": run_id, "seq": s} for s in seqs]))


def test_count_committed_sees_lost_duplicated_and_partial_files(tmp_path: Path):
    write(tmp_path, "2026-11-21--10/part-a-0-0.json", [0, 1, 2])
    write(tmp_path, "2026-11-21--11/part-a-0-1.json", [2, 3])                   # 2 twice, 4 missing
    (tmp_path / "2026-11-21--11/part-a-1-0.json").write_text('[{"run_id": "run-1", "seq": 5}')  # cut off
    write(tmp_path, "2026-11-21--11/.part-a-1-1.json.inprogress.0f3e", [6, 7])  # hidden: not committed
    counts = count_committed(tmp_path, records=6)
    assert counts == {"files": 3, "committed": 5, "runs": 1, "lost": 2, "duplicated": 1, "partial": 1,
                      "unexpected": 0, "hidden_leftovers": 1}
    write(tmp_path, "2026-11-21--11/part-b-0-0.json", [4, 5])
    write(tmp_path, "2026-11-21--11/part-c-0-0.json", [0], run_id="run-2")  # a second run id: nothing is as expected
    assert count_committed(tmp_path, records=6)["runs"] == 2


def test_a_non_zero_promise_fails_the_scenario():
    good = Result("s", counts={"kills": 10, "lost": 0}, zeros=("lost",))
    bad = Result("s", counts={"kills": 10, "lost": 3}, zeros=("lost",))
    assert good.ok and good.line().startswith("s: kills=10 lost=0 (")
    assert not bad.ok and "FAILED: expected lost=0" in bad.line()
    good.check(False, "the job did not finish")
    assert not good.ok and "the job did not finish" in good.line()


def test_count_table_sees_a_fleet_tables_losses_and_its_dead_letters(tmp_path: Path):
    parts, letters = tmp_path / "2026-11-21--10", tmp_path / "_dead_letters" / "2026-11-21--10"
    letters.mkdir(parents=True)
    parts.mkdir()
    (parts / "part-a-0-0.json").write_text(json.dumps([{"meter_id": "m07", "seq": s} for s in (0, 1, 1)]))
    (parts / "part-a-1-0.json").write_text('[{"meter_id": "m07", "seq": 3}')                    # cut off
    (parts / ".part-a-1-1.json.inprogress.0f3e").write_text("[")                                # hidden
    (letters / ".part-b-0-1.json.inprogress.9a").write_text("[")                                # hidden
    letter = {"reason": "not JSON: Unrecognized token", "topic": "fleet.meters.m07", "partition": 0, "offset": 3,
              "payload": "not json"}
    (letters / "part-b-0-0.json").write_text(json.dumps([letter]))
    counts = count_table(tmp_path, "meters_m07", {("m07", 0), ("m07", 1), ("m07", 2)})
    assert {k: counts[k] for k in ("files", "committed", "lost", "duplicated", "partial", "hidden")} == {
        "files": 1, "committed": 3, "lost": 1, "duplicated": 1, "partial": 1, "hidden": 2}
    planted = [b for b in BAD if b[0] == "fleet.meters.m07"]
    assert letters_as_planted(counts, planted) and not letters_as_planted(counts, [])
    (letters / "part-b-1-0.json").write_text(json.dumps([letter]))                              # the letter twice
    assert not letters_as_planted(count_table(tmp_path, "meters_m07", set()), planted)


def test_a_rerun_task_is_read_from_the_executors_logs(tmp_path: Path):
    (tmp_path / "0").mkdir()
    (tmp_path / "1").mkdir()
    (tmp_path / "0" / "stderr").write_text("INFO Executor: Running task 0.0 in stage 0.0 (TID 0)\n"
                                           "INFO Executor: Running task 1.0 in stage 0.0 (TID 1)\n"
                                           "INFO Executor: Running task 0.0 in stage 1.0 (TID 2)\n")
    (tmp_path / "1" / "stderr").write_text("INFO Executor: Running task 0.1 in stage 1.0 (TID 3)\n")
    assert running_stages(tmp_path) == [0, 1]
    assert (reruns(tmp_path, 0), reruns(tmp_path, 1), reruns(tmp_path)) == (0, 1, 1)
