"""Compaction test support: Flink-like raw part files, a private lakeflow home, real spark-submit runs.

``write_parts`` writes what lakeflow's Flink sink commits — each part file one JSON array of
readings, named ``part-<uuid>-<subtask>-<n>.json``, optionally in Flink's hourly bucket folders —
plus, on request, the hidden in-progress files a running job leaves.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

import pytest

REPO = Path(__file__).resolve().parents[2]
SENSORS = ("sensor-001", "sensor-002", "sensor-003", "sensor-004", "sensor-005")
LOCATIONS = ("lab-north", "lab-south", "roof", "basement", "hall")


def readings(run_id: str, count: int, *, start_ms: int, step_ms: int = 1000, seq_start: int = 0,
             seed: int = 0) -> list[dict]:
    """``count`` readings of one ingestion run: seq increasing, time advancing by ``step_ms``."""
    rnd = random.Random(seed)
    out = []
    for i in range(count):
        s = (seq_start + i) % len(SENSORS)
        out.append({"sensor_id": SENSORS[s], "run_id": run_id, "seq": seq_start + i,
                    "timestamp_ms": start_ms + i * step_ms,
                    "temperature": round(18 + 4 * s + rnd.random(), 3),
                    "humidity": round(min(95.0, max(20.0, 40 + 5 * s + rnd.uniform(-3, 3))), 3),
                    "pressure": round(1000 + s + rnd.random(), 3), "location": LOCATIONS[s]})
    return out


def write_parts(root: Path, rows: Sequence[dict], per_file: int, *, subtasks: int = 2,
                bucket_folders: bool = False, job: Optional[str] = None) -> list[Path]:
    """Split ``rows`` into committed part files under ``root`` (as the Flink sink names them)."""
    job = job or str(uuid.uuid4())
    paths = []
    for n, i in enumerate(range(0, len(rows), per_file)):
        chunk = rows[i:i + per_file]
        folder = root
        if bucket_folders:
            hour = chunk[0]["timestamp_ms"] // 3_600_000 * 3_600_000
            from datetime import datetime, timezone
            folder = root / datetime.fromtimestamp(hour / 1000, tz=timezone.utc).strftime("%Y-%m-%d--%H")
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"part-{job}-{n % subtasks}-{n // subtasks}.json"
        path.write_text(json_array(chunk))
        paths.append(path)
    return paths


def json_array(rows: Sequence[dict]) -> str:
    """One part file's content, laid out as lakeflow's Flink writer does: ``[r1,\nr2,\n…rN]\n``."""
    return "[" + ",\n".join(json.dumps(r, separators=(",", ":")) for r in rows) + "]\n"


def write_in_progress(root: Path, rows: Sequence[dict]) -> Path:
    """A hidden in-progress file, as Flink leaves it until the checkpoint commits (half written)."""
    path = root / f".part-{uuid.uuid4()}-0-99.json.inprogress.{uuid.uuid4()}"
    path.write_text(json.dumps(list(rows))[:-40])
    return path


@dataclass
class LakeflowHome:
    """A private lakeflow home with the raw table registered in the embedded local catalog."""

    home: Path
    raw: Path          # the raw table's folder
    env: dict

    def compact(self, *args: str, extra_env: Optional[dict] = None, jars: Sequence[Path] = (),
                spark_conf: Sequence[str] = (), timeout: float = 300) -> subprocess.CompletedProcess:
        """``lakeflow compact`` (real spark-submit, local[2]); output captured."""
        cmd = [sys.executable, "-m", "lakeflow.cli", "compact", *args]
        if jars:
            cmd += ["--jars", ",".join(str(j) for j in jars)]
        for c in spark_conf:
            cmd += ["--spark-conf", c]
        return subprocess.run(cmd, env={**self.env, **(extra_env or {})}, cwd=self.home, text=True,
                              capture_output=True, timeout=timeout)

    def start_compact(self, *args: str) -> subprocess.Popen:
        cmd = [sys.executable, "-m", "lakeflow.cli", "compact", *args]
        return subprocess.Popen(cmd, env=self.env, cwd=self.home, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def enter(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Make this process's environment and working directory those ``lakeflow compact`` sees
        in this home (for in-process runs)."""
        for key in list(os.environ):
            if key not in self.env:
                monkeypatch.delenv(key)
        for key, value in self.env.items():
            monkeypatch.setenv(key, value)
        monkeypatch.chdir(self.home)

    def iceberg_table(self, name: str = "sensor-readings-compacted"):
        from pyiceberg.catalog.sql import SqlCatalog

        catalog = SqlCatalog("lakeflow", uri=f"sqlite:///{self.home / 'iceberg.db'}",
                             warehouse=(self.home / "iceberg").as_uri())
        return catalog.load_table(("iot", name))


def make_home(path: Path) -> LakeflowHome:
    """Register the raw table ``iot.sensor-readings`` in a fresh local catalog under ``path``."""
    from lakeflow.catalog.local import LocalCatalog

    home = path / "lakeflow-home"
    handle = LocalCatalog(home).register(("iot",), "sensor-readings")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("LAKEKEEPER", "WAREHOUSE_ID", "TOKEN", "OAUTH_", "COMPACT_", "LAKEFLOW_"))}
    env.update({"LAKEFLOW_HOME": str(home), "NAMESPACE": "iot", "TABLE": "sensor-readings",
                "LAKEFLOW_ENV_FILE": str(path / "no.env"), "SPARK_LOCAL_IP": "127.0.0.1",
                "PYTHONPATH": str(REPO)})
    return LakeflowHome(home=home, raw=Path(handle.location.removeprefix("file://")), env=env)


@pytest.fixture(scope="session")
def s3a_jars() -> list[Path]:
    """hadoop-aws of pyspark's Hadoop + AWS SDK v2 (lakeflow.runtime.jars: Maven Central, cached in build/jars/);
    a test needing them fails, never skips, when they cannot be had."""
    from lakeflow.runtime.jars import spark_s3_jars

    return spark_s3_jars()


def written_file(target, rows: Sequence[dict], rel: Optional[str] = None, tag: str = "w"):
    """``rows`` of the default schema (one partition's) written as the engines write a table's data file —
    at ``rel`` when given, else under ``data/<tag>/``; returns (its URI, its WrittenFile) for a commit."""
    from dataclasses import replace

    import pyarrow as pa

    from lakeflow.compaction.rows import Writer
    from lakeflow.schema import load_schema
    from lakeflow.schema.arrow import record_schema

    schema = load_schema()
    table = target.table
    writer = Writer(schema, table.schema(), table.spec(), dict(table.properties), target.storage)
    (written,) = writer.write(pa.Table.from_pylist(list(rows), schema=record_schema(schema.fields)), 1,
                              f"data/{tag}", tag)
    if rel is not None:
        target.storage.move(written.rel, rel)
        written = replace(written, rel=rel)
    return target.storage.uri(written.rel), written
