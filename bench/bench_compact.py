"""``make bench-compact``: the compaction job against what a user would run instead, and where
``auto`` should switch engines.

For each size (``--sizes`` / ``BENCH_SIZES``, default ``1m,10m``: 1,000,000 readings in 10,000
JSON-array part files and 10,000,000 in 100,000 — 100 readings per file in the sink's layout), on
the same files in the same run, each in its own process, timed end to end with its peak RSS
(the process tree's, sampled every 0.1 s):

- **pyarrow script**: ``json.load`` every file, one Arrow table, one zstd Parquet file;
- **DuckDB**: ``read_json`` (explicit columns) → ``COPY … (FORMAT parquet, COMPRESSION zstd)``;
- **DuckDB+Iceberg**: the same ``read_json`` → an Arrow table → pyiceberg ``append`` into a fresh
  table of a SQLite catalog (pyiceberg's own pyarrow writer: needs pyarrow ≥ 18);
- **naive Spark**: a PySpark job as a user would write it — ``multiLine`` JSON (explicit schema) →
  ``dropDuplicates(run_id, seq)`` → ``orderBy(timestamp_ms)`` → zstd Parquet, local[2];
- **default**: ``lakeflow compact`` into a fresh Iceberg table, engine ``auto``;
- **arrow** / **spark**: the same with the engine forced (the one ``auto`` took is not run twice).

Ratios are throughput relative to DuckDB. Then, at the largest size, the Spark engine on a
standalone cluster (:class:`lakeflow.runtime.spark_cluster.SparkCluster`, as ``lakeflow spark up`` starts
it) with one worker and with two, one core each: its scaling, and how many of the machine's cores each run keeps busy. The crossover is where the two engines' times, fitted
as ``fixed + per-row cost`` over the sizes measured, meet — the batch size above which Spark is
the faster engine on this machine; then arrow's peak memory per raw byte, which sets how large a
batch ``auto`` gives arrow when no crossover does (:func:`lakeflow.compaction.engine.arrow_max_bytes`). Generated files are cached under ``build/bench/``. Not a test:
figures vary with the machine and its load.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.fixtures_compaction import LOCATIONS, SENSORS, make_home  # noqa: E402

PER_FILE = 100
DAY_MS = 1763683200000
CACHE = ROOT / "build" / "bench"
SIZES = {"100k": 100_000, "1m": 1_000_000, "10m": 10_000_000}
RECORD = ('{"sensor_id":"%s","run_id":"bench-run","seq":%d,"timestamp_ms":%d,"temperature":%.3f,'
          '"humidity":%.3f,"pressure":%.3f,"location":"%s"}')
TARGETS = (("spark", "10m", 0.5), ("default", "10m", 1.0), ("default", "1m", 0.8))  # × DuckDB's rows/s
SPARK_OVER_NAIVE = 3.0  # spark engine at 10M: × the naive PySpark job's rows/s
TWO_WORKERS = 1.7  # spark engine at 10M on two one-core workers: × one
SCRIPTS = ("pyarrow", "duckdb", "duckdb+iceberg", "naive spark")


def generate(rows: int):
    """A lakeflow home whose raw table holds ``rows`` readings (cached: made once per size)."""
    base = CACHE / f"compact-{rows}"
    done = base / "complete"
    home = make_home(base) if done.exists() else None
    if home is not None:
        return home, False
    shutil.rmtree(base, ignore_errors=True)
    home = make_home(base)
    rnd = random.Random(rows)
    for n, start in enumerate(range(0, rows, PER_FILE)):
        lines = [RECORD % (SENSORS[i % 5], i, DAY_MS + i * 50, 18 + 4 * (i % 5) + rnd.random(),
                           40 + 5 * (i % 5) + rnd.random(), 1000 + i % 5 + rnd.random(), LOCATIONS[i % 5])
                 for i in range(start, min(rows, start + PER_FILE))]
        (home.raw / f"part-bench-{n % 2}-{n // 2}.json").write_text("[" + ",\n".join(lines) + "]\n")
    done.touch()
    return home, True


def pyarrow_script(raw: str, out: str) -> None:
    """Every JSON array → one Arrow table → one zstd Parquet file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from lakeflow.readings import FIELDS

    types = {str: pa.string(), int: pa.int64(), float: pa.float64()}
    rows: list[dict] = []
    for path in sorted(Path(raw).glob("part-*.json")):
        with open(path, "rb") as f:
            rows.extend(json.load(f))
    pq.write_table(pa.Table.from_pylist(rows, schema=pa.schema([(n, types[t]) for n, t in FIELDS])), out,
                   compression="zstd")


def duckdb_script(raw: str, out: str) -> None:
    """DuckDB: the JSON arrays, explicit columns → one zstd Parquet file."""
    import duckdb

    from lakeflow.readings import FIELDS

    types = {str: "VARCHAR", int: "BIGINT", float: "DOUBLE"}
    columns = "{" + ", ".join(f"'{n}': '{types[t]}'" for n, t in FIELDS) + "}"
    duckdb.sql(f"COPY (SELECT * FROM read_json('{raw}/part-*.json', format = 'array', columns = {columns})) "
               f"TO '{out}' (FORMAT parquet, COMPRESSION zstd)")


def duckdb_iceberg_script(raw: str, out: str) -> None:
    """DuckDB reads the JSON arrays into Arrow; pyiceberg appends them to a fresh Iceberg table."""
    import duckdb
    from pyiceberg.catalog.sql import SqlCatalog

    from lakeflow.readings import FIELDS

    types = {str: "VARCHAR", int: "BIGINT", float: "DOUBLE"}
    columns = "{" + ", ".join(f"'{n}': '{types[t]}'" for n, t in FIELDS) + "}"
    rows = duckdb.sql(f"SELECT * FROM read_json('{raw}/part-*.json', format = 'array', columns = {columns})").arrow()
    if not isinstance(rows, __import__("pyarrow").Table):  # duckdb ≥ 1.4: a RecordBatchReader
        rows = rows.read_all()
    home = Path(out).with_suffix(".iceberg")
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir()
    catalog = SqlCatalog("bench", uri=f"sqlite:///{home}/catalog.db", warehouse=home.as_uri())
    catalog.create_namespace("bench")
    catalog.create_table("bench.readings", schema=rows.schema).append(rows)


def naive_spark_script(raw: str, out: str) -> None:
    """The PySpark job a user would write: multiLine JSON → dropDuplicates → orderBy → Parquet."""
    from pyspark.sql import SparkSession

    from lakeflow.compaction.spark.read import SCHEMA_DDL
    from lakeflow.compaction.spark.session import with_driver_memory

    os.environ["PYSPARK_SUBMIT_ARGS"] = with_driver_memory("pyspark-shell")  # the engine's driver memory
    spark = (SparkSession.builder.master("local[2]").config("spark.sql.parquet.compression.codec", "zstd")
             .config("spark.ui.enabled", "false").getOrCreate())
    (spark.read.schema(SCHEMA_DDL).option("multiLine", True).json(f"{raw}/part-*.json")
     .dropDuplicates(["run_id", "seq"]).orderBy("timestamp_ms").write.mode("overwrite").parquet(out))
    spark.stop()


def tree_usage(pid: int, cpu: dict[int, float]) -> int:
    """Resident bytes of ``pid`` and its descendants; their CPU seconds so far recorded in ``cpu``."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    ticks: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
                fields = stat[stat.rindex(")") + 2:].split()
                children.setdefault(int(fields[1]), []).append(int(entry))
                rss[int(entry)] = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
                ticks[int(entry)] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
            except (OSError, ValueError):
                continue
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        total += rss.get(p, 0)
        cpu[p] = max(cpu.get(p, 0.0), ticks.get(p, 0.0))
        todo.extend(children.get(p, []))
    return total


CPU_SECONDS: list[float] = []  # CPU time of each run()'s process tree (sampled): the load shows less in it


def run(cmd: list[str], env: dict, cwd: Path) -> tuple[float, int, str]:
    """Seconds, peak RSS of the process tree, and output of ``cmd`` (its CPU seconds: CPU_SECONDS)."""
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    peak = [0]
    cpu: dict[int, float] = {}

    def sample() -> None:
        while proc.poll() is None:
            peak[0] = max(peak[0], tree_usage(proc.pid, cpu))
            time.sleep(0.1)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    output, _ = proc.communicate()
    seconds = time.monotonic() - t0
    sampler.join()
    CPU_SECONDS.append(sum(cpu.values()))  # (to the last sample: up to 0.1 s of each process missed)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:4])}… failed ({proc.returncode}):\n{output[-3000:]}")
    return seconds, peak[0], output


def compaction(home, rows: int, engine: str, *extra: str) -> tuple[float, int, str]:
    """``lakeflow compact`` into a fresh Iceberg table; seconds, peak RSS, the engine that ran."""
    for leftover in (home.home / "iceberg.db", home.home / "iceberg", home.raw / "_lakeflow"):
        shutil.rmtree(leftover, ignore_errors=True) if leftover.is_dir() else leftover.unlink(missing_ok=True)
    report = home.home / "report.json"
    cmd = [sys.executable, "-m", "lakeflow.cli", "compact", "--report", str(report), "--engine", engine, *extra]
    seconds, rss, _ = run(cmd, home.env, home.home)
    r = json.loads(report.read_text())
    assert r["rows_out"] == rows and r["files_compacted"] == -(-rows // PER_FILE), r
    return seconds, rss, r["engine"]


def measure(rows: int, repeats: int) -> dict[str, dict]:
    home, made = generate(rows)
    print(f"{rows:,} readings in {-(-rows // PER_FILE):,} files ({'generated' if made else 'cached'} "
          f"under {home.raw})", flush=True)
    out = home.home.parent / "out.parquet"
    scripts = {name: [sys.executable, __file__, "--script", name, str(home.raw), str(out)] for name in SCRIPTS}
    runs: dict[str, list[tuple[float, int]]] = {}
    auto_engine = ""
    for i in range(repeats):  # interleaved, so that a noisy moment hits every contender
        for name, cmd in scripts.items():
            seconds, rss, _ = run(cmd, home.env, home.home)
            runs.setdefault(name, []).append((seconds, rss))
            print(f"  {name:<14} {seconds:7.1f} s {rss / 2**20:7.0f} MiB {CPU_SECONDS[-1]:7.1f} CPU s", flush=True)
            shutil.rmtree(out, ignore_errors=True) if out.is_dir() else out.unlink(missing_ok=True)
        seconds, rss, auto_engine = compaction(home, rows, "auto")
        runs.setdefault("default", []).append((seconds, rss))
        print(f"  default        {seconds:7.1f} s {rss / 2**20:7.0f} MiB {CPU_SECONDS[-1]:7.1f} CPU s ({auto_engine})",
              flush=True)
        other = "spark" if auto_engine == "arrow" else "arrow"
        seconds, rss, _ = compaction(home, rows, other)
        runs.setdefault(other, []).append((seconds, rss))
        print(f"  {other:<14} {seconds:7.1f} s {rss / 2**20:7.0f} MiB {CPU_SECONDS[-1]:7.1f} CPU s", flush=True)
    runs[auto_engine] = runs["default"]
    raw_bytes = sum(p.stat().st_size for p in home.raw.glob("part-*.json"))
    return {name: {"s": statistics.median(s for s, _ in rs), "rss": statistics.median(r for _, r in rs),
                   "engine": auto_engine, "raw_bytes": raw_bytes} for name, rs in runs.items()}


def crossover(results: dict[int, dict[str, dict]]) -> Optional[float]:
    """Rows at which the fitted spark and arrow times meet (None: no crossover in sight)."""
    sizes = sorted(results)
    if len(sizes) < 2:
        return None
    lo, hi = sizes[0], sizes[-1]

    def fit(engine: str) -> tuple[float, float]:
        per_row = (results[hi][engine]["s"] - results[lo][engine]["s"]) / (hi - lo)
        return results[lo][engine]["s"] - per_row * lo, per_row

    (a_fixed, a_row), (s_fixed, s_row) = fit("arrow"), fit("spark")
    return (s_fixed - a_fixed) / (a_row - s_row) if a_row > s_row else None


def table(results: dict[int, dict[str, dict]], repeats: int) -> None:
    """The table of every size measured so far, and the targets."""
    cols = (*SCRIPTS, "default", "arrow", "spark")
    print(f"\nmedian of {repeats}, each end to end in its own process: seconds, rows/s (× DuckDB), peak RSS")
    for rows, r in results.items():
        duck = rows / r["duckdb"]["s"]
        print(f"{rows:,} readings in {-(-rows // PER_FILE):,} files (default = {r['default']['engine']}):")
        for c in cols:
            x = r[c]
            print(f"  {c:<14} {x['s']:7.1f} s {rows / x['s'] / 1000:7,.0f}k rows/s ({rows / x['s'] / duck:.2f}× DuckDB) "
                  f"{x['rss'] / 2**30:5.1f} GiB")
    print()
    for engine, size, goal in TARGETS:
        rows = SIZES[size]
        if rows in results:
            r = results[rows]
            got = r["duckdb"]["s"] / r[engine]["s"]
            print(f"target {engine} ≥ {goal}× DuckDB at {rows:,}: {got:.2f}× — {'met' if got >= goal else 'NOT met'}")
    if SIZES["10m"] in results:
        r = results[SIZES["10m"]]
        got = r["naive spark"]["s"] / r["spark"]["s"]
        print(f"target spark ≥ {SPARK_OVER_NAIVE}× the naive PySpark job at 10,000,000: {got:.2f}× — "
              f"{'met' if got >= SPARK_OVER_NAIVE else 'NOT met'}")


def scaling(rows: int, repeats: int) -> None:
    """The Spark engine on a standalone cluster of one, then two one-core workers: time and speed-up."""
    from lakeflow.runtime.spark_cluster import SparkCluster
    from lakeflow.secret import is_secret_key

    home, _ = generate(rows)
    seconds: dict[int, float] = {}
    for workers in (1, 2):
        cluster = SparkCluster(CACHE / f"cluster-{workers}", port=free_port(), cores=1, memory="3g", workers=workers,
                               secret_variable=is_secret_key)
        cluster.start()
        try:
            times = []
            for _ in range(repeats):
                busy = busy_cpu_seconds()
                s, rss, _ = compaction(home, rows, "spark", "--master", cluster.master_url,
                                       "--spark-conf", "spark.executor.memory=2g")
                busy = busy_cpu_seconds() - busy
                times.append(s)
                print(f"  spark, {workers} worker(s) × 1 core {s:7.1f} s {rss / 2**20:7.0f} MiB; the machine "
                      f"{busy / s:.2f} of {os.cpu_count()} cores busy (the driver's processes "
                      f"{CPU_SECONDS[-1] / s:.2f}; on a quiet machine the rest is the executors')", flush=True)
            seconds[workers] = statistics.median(times)
        finally:
            cluster.stop()
    got = seconds[1] / seconds[2]
    print(f"Spark engine on a standalone cluster at {rows:,}: 1 worker {seconds[1]:.1f} s, 2 workers {seconds[2]:.1f} s "
          f"= {got:.2f}× — target ≥ {TWO_WORKERS}×: {'met' if got >= TWO_WORKERS else 'NOT met'}")


def busy_cpu_seconds() -> float:
    """CPU seconds the whole machine has spent busy (not idle or waiting for I/O) since boot."""
    ticks = [int(t) for t in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:8]]
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    from lakeflow.runtime.ports import free_ports

    return free_ports(1)[0]


def main() -> int:
    if sys.argv[1:2] == ["--script"]:
        scripts = {"pyarrow": pyarrow_script, "duckdb": duckdb_script, "duckdb+iceberg": duckdb_iceberg_script,
                   "naive spark": naive_spark_script}
        scripts[sys.argv[2]](sys.argv[3], sys.argv[4])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default=os.environ.get("BENCH_SIZES", "1m,10m"),
                        help=f"comma-separated: {', '.join(SIZES)} or a number of readings (env BENCH_SIZES)")
    parser.add_argument("--repeats", type=int, default=2, help="runs of each contender per size (median)")
    parser.add_argument("--no-cluster", action="store_true", help="skip the standalone cluster's scaling")
    args = parser.parse_args()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    names = [s.strip().lower() for s in args.sizes.split(",") if s.strip()]
    sizes = {SIZES.get(n) or int(n): n for n in names}
    results: dict[int, dict[str, dict]] = {}
    for rows in sizes:
        results[rows] = measure(rows, args.repeats)
        table(results, args.repeats)  # after each size: a long run still reports what it measured
    cross = crossover(results)
    if cross is None:
        print("crossover: none in the sizes measured (Spark never the faster engine, or one size only)")
    else:
        per_row = next(iter(results.values()))["arrow"]["raw_bytes"] / next(iter(results))
        print(f"crossover: Spark is faster above ~{cross:,.0f} readings ≈ {cross * per_row / 2**20:,.0f} MiB of raw "
              f"JSON (COMPACT_ARROW_MAX_MB)")
    memory_bound(results)
    if not args.no_cluster:
        scaling(max(results), args.repeats)
    return 0


def memory_bound(results: dict[int, dict[str, dict]]) -> None:
    """arrow's peak RSS against its batch's raw bytes (fitted as base + slope over the sizes
    measured), the factor ``auto`` assumes, and the largest batch ``auto`` gives arrow here now."""
    from lakeflow.compaction.engine import ARROW_PEAK_PER_RAW_BYTE, arrow_max_bytes

    points = sorted((r["arrow"]["raw_bytes"], r["arrow"]["rss"]) for r in results.values())
    (raw_lo, rss_lo), (raw_hi, rss_hi) = points[0], points[-1]
    if raw_hi > raw_lo:
        slope = (rss_hi - rss_lo) / (raw_hi - raw_lo)
        verdict = "" if slope <= ARROW_PEAK_PER_RAW_BYTE else " — TOO LOW"
        fit = f"{(rss_lo - slope * raw_lo) / 2**20:,.0f} MiB + {slope:.2f}× its batch's raw bytes (fit over the sizes)"
    else:
        verdict = ""  # one size: the interpreter's own ~0.2 GiB cannot be told from the batch's share
        fit = f"{rss_hi / raw_hi:.2f}× its batch's raw bytes, the interpreter's own ~0.2 GiB included (one size)"
    limit = arrow_max_bytes(None)
    print(f"arrow's peak RSS ≈ {fit}; auto assumes {ARROW_PEAK_PER_RAW_BYTE}×{verdict}, and gives arrow batches up to "
          f"{limit / 2**20:,.0f} MiB of raw JSON on this machine now (≈ {limit / raw_hi * max(results):,.0f} "
          f"readings), spark above")


if __name__ == "__main__":
    sys.exit(main())
