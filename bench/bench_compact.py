"""``make bench-compact``: the compaction job against what a user would run instead, and where
``auto`` should switch engines.

For each size (``--sizes`` / ``BENCH_SIZES``, default ``1m,10m``: 1,000,000 records in 10,000
JSON-array part files and 10,000,000 in 100,000 — 100 records per file in the sink's layout) of a
schema (``--schema`` / ``BENCH_SCHEMA``: ``default``, lakeflow's sensor reading, or ``nested``, a
user's of about the same bytes per record — docs/schemas/vibration-sensor.schema.json: a struct, a
list, a map, a decimal, an RFC 3339 event time), on the same files in the same run, each in its own
process, timed end to end with its peak RSS (the process tree's, sampled every 0.1 s):

- **pyarrow script** (default schema): ``json.load`` every file, one Arrow table, one zstd Parquet file;
- **DuckDB**: ``read_json`` (explicit columns, the schema's types) → ``COPY … (FORMAT parquet, COMPRESSION zstd)``;
- **DuckDB+Iceberg**: the same ``read_json`` → an Arrow table → pyiceberg ``append`` into a fresh
  table of a SQLite catalog (pyiceberg's own pyarrow writer);
- **naive Spark**: a PySpark job as a user would write it — ``multiLine`` JSON (explicit schema) →
  ``dropDuplicates(key)`` → ``orderBy(event time)`` → zstd Parquet, local[2];
- **fixed-schema arrow** (default schema): lakeflow 0.2's arrow engine, the sensor reading compiled in
  (commit bcad9de, extracted by ``git archive`` into build/bench/), on the same files: what the
  declared schema costs;
- **default**: ``lakeflow compact`` into a fresh Iceberg table, engine ``auto``;
- **arrow** / **spark**: the same with the engine forced (the one ``auto`` took is not run twice).

Ratios are throughput relative to DuckDB (and the Spark engine's to the arrow engine's). Then, at the largest size, the Spark engine on a
standalone cluster (:class:`lakeflow.runtime.spark_cluster.SparkCluster`, as ``lakeflow spark up`` starts
it) with one worker and with two, one core each: its scaling, and how many of the machine's cores each run keeps busy. The crossover is where the two engines' times, fitted
as ``fixed + per-row cost`` over the sizes measured, meet — the batch size above which Spark is
the faster engine on this machine; then arrow's peak memory per raw byte, which sets how large a
batch ``auto`` gives arrow when no crossover does (:func:`lakeflow.compaction.engine.arrow_limit`); then each
engine on the same readings with ``--duplicates`` / ``BENCH_DUPLICATES`` % (default 1) sent twice, against
none (the de-duplication's cost). Generated files are cached under ``build/bench/``. Not a test:
figures vary with the machine and its load.
"""

from __future__ import annotations

import argparse
import collections
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
from collections.abc import Sequence
from typing import Optional

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.machine import describe  # noqa: E402

from tests.support.fixtures_compaction import make_home  # noqa: E402

PER_FILE = 100
STEP_MS = 50  # between two records' event times: 10,000,000 records span 5.8 days
CACHE = ROOT / "build" / "bench"
SIZES = {"100k": 100_000, "1m": 1_000_000, "10m": 10_000_000}
SCHEMAS = {"default": None, "nested": ROOT / "docs" / "schemas" / "vibration-sensor.schema.json"}
FIXED_SCHEMA_COMMIT = "bcad9de"  # lakeflow 0.2: the sensor reading compiled into the arrow engine
# (contender, size, goal, baseline): contender's rows/s ≥ goal × baseline's (issue #40; #32 for the last)
TARGETS = (
    ("default", "10m", 1.2, "duckdb"),
    ("default", "1m", 1.0, "duckdb"),
    ("spark", "10m", 0.9, "arrow"),
    ("spark", "10m", 0.8, "duckdb"),
    ("arrow", "10m", 0.95, "fixed-schema arrow"),  # the declared schema costs at most 5 %
)
TWO_WORKERS = 1.5  # spark engine at 10M on two one-core workers: × one
DRIVER_RSS = 1.2  # the Spark driver's peak RSS at 10M: at most × its peak at 1M
REPLAY_WINDOW = 5_000  # a duplicated record is a copy of one of the last this many sent
SCRIPTS = ("pyarrow", "duckdb", "duckdb+iceberg", "naive spark", "fixed-schema arrow")


def schema_of(name: str):
    from lakeflow.schema import load_schema

    return load_schema(SCHEMAS[name])


def generate(rows: int, schema_name: str, duplicated_pct: float = 0.0):
    """A lakeflow home whose raw table holds ``rows`` records of the schema (cached: made once per size),
    and ``duplicated_pct`` % of them sent twice: a copy of a recent record (one of the last
    :data:`REPLAY_WINDOW` lines, as a producer's retry or a replay after a restart resends) in a later file."""
    from lakeflow.schema.examples import examples

    base = CACHE / (f"compact-{schema_name}-{rows}" + (f"-dup{duplicated_pct:g}" if duplicated_pct else ""))
    done = base / "complete"
    home = make_home(base) if done.exists() else None
    if home is not None:
        return with_schema(home, schema_name), False
    shutil.rmtree(base, ignore_errors=True)
    home = make_home(base)
    schema = schema_of(schema_name)
    rnd, replays = random.Random(rows), random.Random(-rows)
    recent: collections.deque[str] = collections.deque(maxlen=REPLAY_WINDOW)
    pending: list[str] = []
    n = 0
    for start in range(0, rows, PER_FILE):
        for record in examples(schema, start, min(rows, start + PER_FILE) - start, STEP_MS):
            line = json.dumps(_vary(record, rnd), separators=(",", ":"))
            if recent and replays.random() * 100 < duplicated_pct:
                pending.append(recent[replays.randrange(len(recent))])
            pending.append(line)
            recent.append(line)
        while len(pending) >= PER_FILE or (pending and start + PER_FILE >= rows):
            lines, pending = pending[:PER_FILE], pending[PER_FILE:]
            (home.raw / f"part-bench-{n % 2}-{n // 2}.json").write_text("[" + ",\n".join(lines) + "]\n")
            n += 1
    done.touch()
    return with_schema(home, schema_name), True


def _vary(record: dict, rnd: random.Random) -> dict:
    """Measurements that vary as a sensor's do (an example's doubles are n + 0.5)."""
    return {k: round(v + rnd.random(), 3) if isinstance(v, float) else v for k, v in record.items()}


def with_schema(home, schema_name: str):
    if SCHEMAS[schema_name] is not None:
        home.env["TABLE_SCHEMA"] = str(SCHEMAS[schema_name])
    return home


def duckdb_type(t) -> str:
    """A column's DuckDB type, for read_json's explicit columns."""
    from pyiceberg.types import DecimalType, ListType, MapType, StructType

    from lakeflow.schema.types import kind

    if isinstance(t, StructType):
        return "STRUCT(" + ", ".join(f'"{f.name}" {duckdb_type(f.field_type)}' for f in t.fields) + ")"
    if isinstance(t, ListType):
        return f"{duckdb_type(t.element_type)}[]"
    if isinstance(t, MapType):
        return f"MAP(VARCHAR, {duckdb_type(t.value_type)})"
    if isinstance(t, DecimalType):
        return f"DECIMAL({t.precision}, {t.scale})"
    return {"string": "VARCHAR", "long": "BIGINT", "int": "INTEGER", "double": "DOUBLE", "float": "FLOAT",
            "boolean": "BOOLEAN", "date": "DATE", "timestamptz": "TIMESTAMPTZ", "timestamp": "TIMESTAMP"}[kind(t)]


def duckdb_columns(schema) -> str:
    return "{" + ", ".join(f"'{f.name}': '{duckdb_type(f.field_type)}'" for f in schema.fields.fields) + "}"


def pyarrow_script(raw: str, out: str, schema) -> None:
    """Every JSON array → one Arrow table → one zstd Parquet file (a flat schema's)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from lakeflow.schema.arrow import record_schema

    rows: list[dict] = []
    for path in sorted(Path(raw).glob("part-*.json")):
        with open(path, "rb") as f:
            rows.extend(json.load(f))
    pq.write_table(pa.Table.from_pylist(rows, schema=record_schema(schema.fields)), out, compression="zstd")


def duckdb_script(raw: str, out: str, schema) -> None:
    """DuckDB: the JSON arrays, explicit columns → one zstd Parquet file."""
    import duckdb

    duckdb.sql(f"COPY (SELECT * FROM read_json('{raw}/part-*.json', format = 'array', "
               f"columns = {duckdb_columns(schema)})) TO '{out}' (FORMAT parquet, COMPRESSION zstd)")


def duckdb_iceberg_script(raw: str, out: str, schema) -> None:
    """DuckDB reads the JSON arrays into Arrow; pyiceberg appends them to a fresh Iceberg table."""
    import duckdb
    from pyiceberg.catalog.sql import SqlCatalog

    rows = duckdb.sql(f"SELECT * FROM read_json('{raw}/part-*.json', format = 'array', "
                      f"columns = {duckdb_columns(schema)})").arrow()
    if not isinstance(rows, __import__("pyarrow").Table):  # duckdb ≥ 1.4: a RecordBatchReader
        rows = rows.read_all()
    home = Path(out).with_suffix(".iceberg")
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir()
    catalog = SqlCatalog("bench", uri=f"sqlite:///{home}/catalog.db", warehouse=home.as_uri())
    catalog.create_namespace("bench")
    catalog.create_table("bench.readings", schema=rows.schema).append(rows)


def naive_spark_script(raw: str, out: str, schema) -> None:
    """The PySpark job a user would write: multiLine JSON → dropDuplicates → orderBy → Parquet."""
    from pyspark.sql import SparkSession
    from pyspark.sql.pandas.types import from_arrow_schema

    from lakeflow.compaction.spark.session import with_driver_memory
    from lakeflow.schema.arrow import record_schema

    os.environ["PYSPARK_SUBMIT_ARGS"] = with_driver_memory("pyspark-shell")  # the engine's driver memory
    spark = (SparkSession.builder.master("local[2]").config("spark.sql.parquet.compression.codec", "zstd")
             .config("spark.ui.enabled", "false").getOrCreate())
    (spark.read.schema(from_arrow_schema(record_schema(schema.fields))).option("multiLine", True)
     .json(f"{raw}/part-*.json").dropDuplicates(list(schema.key)).orderBy(schema.event_time)
     .write.mode("overwrite").parquet(out))
    spark.stop()


def fixed_schema_baseline() -> Path:
    """lakeflow 0.2's code (the sensor reading compiled in), extracted once: its folder for PYTHONPATH."""
    folder = CACHE / f"lakeflow-{FIXED_SCHEMA_COMMIT}"
    if not (folder / "complete").exists():
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", FIXED_SCHEMA_COMMIT, "lakeflow", "jobs"],
                                 check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
        (folder / "complete").touch()
    return folder


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


DUPLICATES_DROPPED: list[int] = []  # what each compaction() reported dropping
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


def compaction(home, rows: int, engine: str, *extra: str, pythonpath: Optional[Path] = None
               ) -> tuple[float, int, str]:
    """``lakeflow compact`` into a fresh Iceberg table (``pythonpath``: another lakeflow's code); seconds,
    peak RSS, the engine that ran."""
    for leftover in (home.home / "iceberg.db", home.home / "iceberg", home.raw / "_lakeflow", home.raw / "_quarantine"):
        shutil.rmtree(leftover, ignore_errors=True) if leftover.is_dir() else leftover.unlink(missing_ok=True)
    report = home.home / "report.json"
    cmd = [sys.executable, "-m", "lakeflow.cli", "compact", "--report", str(report), "--engine", engine, *extra]
    env = home.env if pythonpath is None else {**home.env, "PYTHONPATH": str(pythonpath)}
    seconds, rss, _ = run(cmd, env, home.home)
    r = json.loads(report.read_text())
    files = sum(1 for _ in home.raw.glob("part-*.json"))
    assert r["rows_out"] == rows and r["files_compacted"] == files, r
    DUPLICATES_DROPPED.append(r["duplicates_dropped"])
    return seconds, rss, r["engine"]


def measure(rows: int, repeats: int, schema_name: str, baselines: Sequence[str] = SCRIPTS) -> dict[str, dict]:
    home, made = generate(rows, schema_name)
    print(f"{rows:,} records of the {schema_name} schema in {-(-rows // PER_FILE):,} files "
          f"({'generated' if made else 'cached'} under {home.raw})", flush=True)
    out = home.home.parent / "out.parquet"
    flat = schema_name == "default"
    scripts = {name: [sys.executable, __file__, "--script", name, schema_name, str(home.raw), str(out)]
               for name in SCRIPTS if name in baselines and (flat or name not in ("pyarrow", "fixed-schema arrow"))}
    runs: dict[str, list[tuple[float, int, float]]] = {}  # seconds, peak RSS, CPU seconds
    auto_engine = ""
    for i in range(repeats):  # interleaved, so that a noisy moment hits every contender
        for name, cmd in scripts.items():
            if name == "fixed-schema arrow":
                seconds, rss, _ = compaction(home, rows, "arrow", pythonpath=fixed_schema_baseline())
            else:
                seconds, rss, _ = run(cmd, home.env, home.home)
            runs.setdefault(name, []).append((seconds, rss, CPU_SECONDS[-1]))
            print(f"  {name:<18} {seconds:7.1f} s {rss / 2**20:7.0f} MiB {CPU_SECONDS[-1]:7.1f} CPU s", flush=True)
            shutil.rmtree(out, ignore_errors=True) if out.is_dir() else out.unlink(missing_ok=True)
        seconds, rss, auto_engine = compaction(home, rows, "auto")
        runs.setdefault("default", []).append((seconds, rss, CPU_SECONDS[-1]))
        print(f"  default            {seconds:7.1f} s {rss / 2**20:7.0f} MiB {CPU_SECONDS[-1]:7.1f} CPU s "
              f"({auto_engine})", flush=True)
        other = "spark" if auto_engine == "arrow" else "arrow"
        seconds, rss, _ = compaction(home, rows, other)
        runs.setdefault(other, []).append((seconds, rss, CPU_SECONDS[-1]))
        print(f"  {other:<18} {seconds:7.1f} s {rss / 2**20:7.0f} MiB {CPU_SECONDS[-1]:7.1f} CPU s", flush=True)
    runs[auto_engine] = runs["default"]
    raw_bytes = sum(p.stat().st_size for p in home.raw.glob("part-*.json"))
    return {name: {"s": statistics.median(s for s, _, _ in rs), "rss": statistics.median(r for _, r, _ in rs),
                   "cores": statistics.median(c / s for s, _, c in rs), "engine": auto_engine, "raw_bytes": raw_bytes}
            for name, rs in runs.items()}


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
    print(f"\nmedian of {repeats}, each end to end in its own process: seconds, rows/s (× DuckDB), peak RSS, "
          f"cores kept busy (CPU seconds / seconds, of {os.cpu_count()})")
    for rows, r in results.items():
        duck = rows / r["duckdb"]["s"]
        print(f"{rows:,} records in {-(-rows // PER_FILE):,} files (default = {r['default']['engine']}):")
        for c in (*SCRIPTS, "default", "arrow", "spark"):
            if c in r:
                x = r[c]
                print(f"  {c:<18} {x['s']:7.1f} s {rows / x['s'] / 1000:7,.0f}k rows/s "
                      f"({rows / x['s'] / duck:.2f}× DuckDB) {x['rss'] / 2**30:5.1f} GiB {x['cores']:5.2f} cores")
    print()
    for engine, size, goal, baseline in TARGETS:
        rows = SIZES[size]
        if rows in results and baseline in results[rows]:
            r = results[rows]
            got = r[baseline]["s"] / r[engine]["s"]
            print(f"target {engine} ≥ {goal}× {baseline} at {rows:,}: {got:.2f}× — {'met' if got >= goal else 'NOT met'}")


def duplicates(sizes: list[int], repeats: int, schema_name: str, pct: float) -> None:
    """Each engine on a batch with no duplicate and on the same readings with ``pct`` % sent twice:
    what proving a batch free of duplicates costs, and what dropping them does."""
    print(f"\nde-duplication: the same readings with {pct:g} % sent twice (copies of recent ones, in later files)")
    for rows in sizes:
        clean, _ = generate(rows, schema_name)
        dirty, made = generate(rows, schema_name, pct)
        files = sum(1 for _ in dirty.raw.glob("part-*.json"))
        print(f"{rows:,} readings + duplicates in {files:,} files ({'generated' if made else 'cached'})", flush=True)
        for engine in ("arrow", "spark"):
            times: dict[str, list[float]] = {"clean": [], "dirty": []}
            for _ in range(repeats):
                for kind, home in (("clean", clean), ("dirty", dirty)):
                    times[kind].append(compaction(home, rows, engine)[0])
            dropped = DUPLICATES_DROPPED[-1]
            a, b = statistics.median(times["clean"]), statistics.median(times["dirty"])
            print(f"  {engine:<6} none {a:6.1f} s, {pct:g} % {b:6.1f} s ({dropped:,} dropped) = {b / a:.2f}× the time",
                  flush=True)


def scaling(sizes: list[int], repeats: int, schema_name: str) -> None:
    """The Spark engine on a standalone cluster of one, then two one-core workers: time and speed-up at
    the largest size; the driver's peak RSS (the executors run in the workers) at each size."""
    from lakeflow.runtime.spark_cluster import SparkCluster
    from lakeflow.secret import is_secret_key

    seconds: dict[tuple[int, int], float] = {}
    driver: dict[int, int] = {}
    for workers in (1, 2):
        cluster = SparkCluster(CACHE / f"cluster-{workers}", port=free_port(), cores=1, memory="3g", workers=workers,
                               secret_variable=is_secret_key)
        cluster.start()
        try:
            for rows in sizes if workers == 2 else sizes[-1:]:
                home, _ = generate(rows, schema_name)
                times, peaks = [], []
                for _ in range(repeats):
                    busy = busy_cpu_seconds()
                    s, rss, _ = compaction(home, rows, "spark", "--master", cluster.master_url,
                                           "--spark-conf", "spark.executor.memory=2g")
                    busy = busy_cpu_seconds() - busy
                    times.append(s)
                    peaks.append(rss)
                    print(f"  spark at {rows:,}, {workers} worker(s) × 1 core {s:7.1f} s, driver {rss / 2**20:7.0f} MiB; "
                          f"the machine {busy / s:.2f} of {os.cpu_count()} cores busy (the driver's processes "
                          f"{CPU_SECONDS[-1] / s:.2f}; on a quiet machine the rest is the executors')", flush=True)
                seconds[(workers, rows)] = statistics.median(times)
                driver[rows] = statistics.median(peaks) if workers == 2 else driver.get(rows, 0)
        finally:
            cluster.stop()
    big = sizes[-1]
    got = seconds[(1, big)] / seconds[(2, big)]
    print(f"Spark engine on a standalone cluster at {big:,}: 1 worker {seconds[(1, big)]:.1f} s, 2 workers "
          f"{seconds[(2, big)]:.1f} s = {got:.2f}× — target ≥ {TWO_WORKERS}×: {'met' if got >= TWO_WORKERS else 'NOT met'}")
    if len(sizes) > 1:
        ratio = driver[big] / driver[sizes[0]]
        print(f"the Spark driver's peak RSS: {driver[sizes[0]] / 2**20:,.0f} MiB at {sizes[0]:,}, "
              f"{driver[big] / 2**20:,.0f} MiB at {big:,} = {ratio:.2f}× — target ≤ {DRIVER_RSS}×: "
              f"{'met' if ratio <= DRIVER_RSS else 'NOT met'}")


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
        scripts[sys.argv[2]](sys.argv[4], sys.argv[5], schema_of(sys.argv[3]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default=os.environ.get("BENCH_SIZES", "1m,10m"),
                        help=f"comma-separated: {', '.join(SIZES)} or a number of readings (env BENCH_SIZES)")
    parser.add_argument("--schema", choices=sorted(SCHEMAS), default=os.environ.get("BENCH_SCHEMA", "default"),
                        help="the records' schema (env BENCH_SCHEMA; default: lakeflow's sensor reading)")
    parser.add_argument("--repeats", type=int, default=2, help="runs of each contender per size (median)")
    parser.add_argument("--duplicates", type=float, default=float(os.environ.get("BENCH_DUPLICATES", "1")),
                        metavar="PCT", help="then each engine on the readings with PCT %% sent twice (env "
                        "BENCH_DUPLICATES; default 1; 0: skip)")
    parser.add_argument("--no-cluster", action="store_true", help="skip the standalone cluster's scaling")
    parser.add_argument("--baselines", default=os.environ.get("BENCH_BASELINES", ",".join(SCRIPTS)),
                        help="comma-separated: which of the other contenders run (env BENCH_BASELINES; default "
                        f"all: {', '.join(SCRIPTS)}; duckdb always, every ratio is against it)")
    args = parser.parse_args()
    baselines = {b.strip() for b in args.baselines.split(",") if b.strip()} | {"duckdb"}
    unknown = baselines - set(SCRIPTS)
    if unknown:
        parser.error(f"--baselines: unknown {', '.join(sorted(unknown))} (known: {', '.join(SCRIPTS)})")
    print(describe(), flush=True)  # what the figures below ran on
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from lakeflow.compaction.engine import CROSSOVER_BYTES

    names = [s.strip().lower() for s in args.sizes.split(",") if s.strip()]
    sizes = {SIZES.get(n) or int(n): n for n in names}
    results: dict[int, dict[str, dict]] = {}
    for rows in sizes:
        results[rows] = measure(rows, args.repeats, args.schema, sorted(baselines))
        table(results, args.repeats)  # after each size: a long run still reports what it measured
    cross = crossover(results)
    if cross is None:
        print("crossover: none in the sizes measured (Spark never the faster engine, or one size only)")
    else:
        per_row = next(iter(results.values()))["arrow"]["raw_bytes"] / next(iter(results))
        print(f"crossover: Spark is faster above ~{cross:,.0f} readings ≈ {cross * per_row / 2**20:,.0f} MiB of raw "
              f"JSON (COMPACT_ARROW_MAX_MB; auto assumes {CROSSOVER_BYTES / 2**20:,.0f} MiB)")
    memory_bound(results)
    if args.duplicates:
        duplicates(sorted(results), args.repeats, args.schema, args.duplicates)
    if not args.no_cluster:
        scaling(sorted(results), args.repeats, args.schema)
    return 0


def memory_bound(results: dict[int, dict[str, dict]]) -> None:
    """arrow's peak RSS against its batch's raw bytes (fitted as base + slope over the sizes
    measured), the factor ``auto`` assumes, and the largest batch ``auto`` gives arrow here now."""
    from lakeflow.compaction.engine import ARROW_PEAK_PER_RAW_BYTE, arrow_limit

    points = sorted((r["arrow"]["raw_bytes"], r["arrow"]["rss"]) for r in results.values())
    (raw_lo, rss_lo), (raw_hi, rss_hi) = points[0], points[-1]
    if raw_hi > raw_lo:
        slope = (rss_hi - rss_lo) / (raw_hi - raw_lo)
        verdict = "" if slope <= ARROW_PEAK_PER_RAW_BYTE else " — TOO LOW"
        fit = f"{(rss_lo - slope * raw_lo) / 2**20:,.0f} MiB + {slope:.2f}× its batch's raw bytes (fit over the sizes)"
    else:
        verdict = ""  # one size: the interpreter's own ~0.2 GiB cannot be told from the batch's share
        fit = f"{rss_hi / raw_hi:.2f}× its batch's raw bytes, the interpreter's own ~0.2 GiB included (one size)"
    limit = arrow_limit(None)
    print(f"arrow's peak RSS ≈ {fit}; auto assumes {ARROW_PEAK_PER_RAW_BYTE}×{verdict}, and gives arrow batches up to "
          f"{limit.max_bytes / 2**20:,.0f} MiB of raw JSON on this machine now (≈ "
          f"{limit.max_bytes / raw_hi * max(results):,.0f} readings; {limit.source}), spark above")


if __name__ == "__main__":
    sys.exit(main())
