"""``tm-kill-kafka``: the ingestion job reading a real Kafka broker (SOURCE=kafka, unbounded) on a
standalone Flink cluster, its TaskManager SIGKILLed while readings are being produced to the topic
(and restarted each time); once every reading has been produced and the committed part files hold
as many, the job is cancelled and every reading counted by (``run_id``, ``seq``): nothing lost,
nothing twice — the Kafka offsets and the part files recover from the same checkpoint. Then, as
``tm-kill``, ``lakeflow maintain --leftover-min-age 0s`` on the raw table: no hidden in-progress file
of the killed attempts left (``hidden_after_maintain``), the committed part files as they were.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Optional

import requests

from lakeflow.runtime.flink_cluster import FlinkCluster
from lakeflow.secret import is_secret_key
from lakeflow.runtime.homes import flink_home
from tests.chaos.common import Result, progress, tail, timed
from tests.chaos.tm_kill import (HEARTBEATS, JOB, PACKAGE, _check_counts, _job_env, _require_package, _running,
                                 _submitted, _wait, count_committed, maintain_local)
from tests.support.fixtures_servers import free_port
from tests.support.kafka_broker import run_kafka
from tests.support.envs import INGEST_PY


def _reading(run_id: str, seq: int) -> str:
    return json.dumps({"sensor_id": f"sensor-{seq % 5 + 1:03d}", "run_id": run_id, "seq": seq,
                       "timestamp_ms": int(time.time() * 1000), "temperature": 21.5, "humidity": 50.0,
                       "pressure": 1012.25, "location": "cold-store"})


def tm_kill_kafka(workdir: Path, *, kills: int = 4, records: int = 8000, batches: int = 16,
                  seed: Optional[int] = None) -> Result:
    result = Result("tm-kill-kafka", zeros=("lost", "duplicated", "partial", "hidden_after_maintain"))
    rnd = random.Random(seed)
    with timed(result):
        _require_package()
        with run_kafka(workdir / "kafka") as broker:
            topic, run_id = "readings", str(uuid.uuid4())
            broker.create_topic(topic, partitions=2)
            cluster = FlinkCluster(workdir / "cluster", rest_port=free_port(), rpc_port=free_port(), conf=HEARTBEATS, secret_variable=is_secret_key)
            cluster.start()
            proc = None
            try:
                home = workdir / "home"
                env = _job_env(cluster, home, records, 150, 1000, SOURCE="kafka", KAFKA_TOPIC=topic,
                               KAFKA_BOOTSTRAP_SERVERS=broker.bootstrap, KAFKA_GROUP_ID="chaos")
                env.pop("PYTHONPATH", None)
                py, log = INGEST_PY, workdir / "flink-run.log"
                with open(log, "w") as out:
                    proc = subprocess.Popen([str(flink_home() / "bin" / "flink"), "run", "-pyclientexec", py,
                                             "-pyexec", py, "-pyfs", str(PACKAGE), "-py", str(JOB),
                                             "--parallelism", "2"], env=env, stdout=out, stderr=subprocess.STDOUT,
                                            cwd=workdir)
                rest = cluster.rest_url
                job_id = _submitted(rest, proc)
                _wait(rest, job_id, _running, 240, "running")
                per_batch = records // batches
                produced = threading.Thread(target=lambda: [
                    broker.produce(topic, [_reading(run_id, seq) for seq in range(b * per_batch, (b + 1) * per_batch)])
                    for b in range(batches)], daemon=True)
                produced.start()
                for done in range(1, kills + 1):
                    _wait(rest, job_id, _running, 240, "running")
                    time.sleep(rnd.uniform(0.5, 3.0))
                    pid = cluster.kill_taskmanager()
                    cluster.start_taskmanager()
                    progress(result.name, f"kill {done}/{kills}: TaskManager {pid} SIGKILLed, a new one started")
                    _wait(rest, job_id, lambda j: not _running(j), 60, "noticed the lost TaskManager")
                produced.join(timeout=300)
                table = home / "warehouse" / "iot" / "sensor-readings"
                deadline = time.monotonic() + 240
                while count_committed(table, records)["committed"] < records and time.monotonic() < deadline:
                    time.sleep(1)
                requests.patch(f"{rest}/v1/jobs/{job_id}", params={"mode": "cancel"}, timeout=10)
                state = _wait(rest, job_id, lambda j: j.get("state") == "CANCELED", 60, "cancelled").get("state")
                failures = requests.get(f"{rest}/v1/jobs/{job_id}/exceptions", timeout=10).json()
                counts = count_committed(table, records)
                result.check(state == "CANCELED", f"job state {state}: {tail(log.read_text(), 4)}")
                _check_counts(result, counts, records, kills,
                              len(failures.get("exceptionHistory", {}).get("entries", [])))
                maintain_local(result, env, workdir, table, records, counts)
            finally:
                if proc is not None and proc.poll() is None:
                    proc.kill()
                cluster.stop()
    return result
