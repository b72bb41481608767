"""The chaos scenarios' own checks can fail: the tm-kill counter finds a lost, a duplicated and a
partial reading, and a summary line with a non-zero promised count fails the run."""

from __future__ import annotations

import json
from pathlib import Path

from tests.chaos.common import Result
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
