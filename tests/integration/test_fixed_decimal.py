"""``FixedDecimal.format(x, p, s)`` (java/lakeflow/flink/FixedDecimal.java), which writes the synthetic
records' numbers into their JSON, gives the very text of Flink's own ``CAST(CAST(x AS DECIMAL(p, s)) AS
STRING)`` — half-up ties, carries, tiny and huge values, negative zero, null past the precision —
against one Flink SQL query over a CSV file of doubles (a batch table environment in the ingestion
environment, the job's jar on its gateway).
"""

from __future__ import annotations

import json
import random
import subprocess
import textwrap
from pathlib import Path

import pytest

from tests.support.envs import INGEST_PY

ROOT = Path(__file__).resolve().parents[2]


def _values() -> list[str]:
    """Doubles as ``repr`` text: random ones of every magnitude, and the ones rounding is hard on."""
    rnd = random.Random(40)
    values = [rnd.uniform(-1, 1) * 10 ** rnd.randint(-9, 9) for _ in range(1500)]
    values += [round(rnd.uniform(-500, 500), 3) + 0.0005 for _ in range(300)]  # near a tie at 3 places
    values += [2.0005, 2.005, 0.125, 0.375, -0.125, 9.9995, 99999.9995, 0.0006, 0.0005, 0.00049, 1e-7,
               -1e-7, 0.0, -0.0, 1.0, -1.0, 21.0, 1e7, 9999999.999, 12345678.9, 1.7976931348623157e308,
               5e-324, 123456.7895, 0.1 + 0.2, 1 / 3, -2 / 3]
    return [repr(v) for v in values]


@pytest.mark.slow
def test_fixed_decimal_is_flinks_cast_to_decimal_then_string(tmp_path: Path) -> None:
    script = textwrap.dedent("""
        import json, sys
        from pyflink.java_gateway import get_gateway
        from pyflink.table import EnvironmentSettings, TableEnvironment
        from pyflink.util.java_utils import add_jars_to_context_class_loader
        from lakeflow.ingest.helpers_jar import jar_path
        folder, shapes = json.loads(sys.stdin.read())
        add_jars_to_context_class_loader([jar_path().as_uri()])
        fixed = get_gateway().jvm.lakeflow.flink.FixedDecimal
        t_env = TableEnvironment.create(EnvironmentSettings.in_batch_mode())
        t_env.get_config().set("parallelism.default", "1")
        t_env.execute_sql(f"CREATE TABLE v (x DOUBLE) WITH ('connector' = 'filesystem', 'path' = '{folder}', "
                          "'format' = 'csv')")
        casts = ", ".join(f"CAST(CAST(x AS DECIMAL({p}, {s})) AS STRING)" for p, s in shapes)
        out = []
        with t_env.execute_sql(f"SELECT x, {casts} FROM v").collect() as results:
            for x, *cast in results:
                row = [repr(x)]
                for (p, s), text in zip(shapes, cast):
                    row += [text, fixed.format(x, p, s)]
                out.append(row)
        print(json.dumps(out))
    """)
    shapes = [(10, 2), (10, 3), (12, 4), (10, 0), (5, 1), (38, 18), (3, 3)]
    (tmp_path / "values").mkdir()
    (tmp_path / "values" / "x.csv").write_text("\n".join(_values()) + "\n")  # Java parses repr's text exactly
    proc = subprocess.run([INGEST_PY, "-c", script], input=json.dumps([(tmp_path / "values").as_uri(), shapes]), cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(rows) == len(_values())
    differ = [(row[0], shape, row[1 + 2 * i], row[2 + 2 * i])
              for row in rows for i, shape in enumerate(shapes) if row[1 + 2 * i] != row[2 + 2 * i]]
    assert not differ, differ[:20]
    nulls = sum(row[1 + 2 * i] is None for row in rows for i in range(len(shapes)))
    assert 0 < nulls < len(rows) * len(shapes)  # past the precision: NULL, as Flink's cast
