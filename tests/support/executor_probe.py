"""A spark-submit job for tests/integration/test_job_environments.py: prints, as one JSON line, what each of
two tasks' Python is (interpreter, pyarrow version, where lakeflow and its compiled decoder come from: "" for
none) on the executors."""

import json

from pyspark.sql import SparkSession


def where(_: int) -> tuple[str, str, str, str]:
    import importlib.util
    import sys

    import pyarrow

    import lakeflow

    native = importlib.util.find_spec("lakeflow_native")
    return sys.executable, pyarrow.__version__, lakeflow.__file__, native.origin if native else ""


if __name__ == "__main__":
    spark = SparkSession.builder.appName("executor-probe").getOrCreate()
    print(json.dumps(spark.sparkContext.parallelize(range(2), 2).map(where).collect()), flush=True)
    spark.stop()
