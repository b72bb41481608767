"""The Python workers' daemon of the Spark engine (``spark.python.daemon.module``): PySpark's own, after
importing the compaction task's modules once — each worker it forks starts with them loaded instead of
importing them itself (pyarrow, pyiceberg's pyarrow I/O, the schema: ~1.5 s of CPU a worker)."""

from pyspark import daemon

import lakeflow.compaction.task  # noqa: F401  (loaded before the forks)

if __name__ == "__main__":
    daemon.manager()
