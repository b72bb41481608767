"""The Python workers' daemon of the Spark engine (``spark.python.daemon.module``): PySpark's own, after
importing the compaction task's modules once — each worker it forks starts with them loaded instead of
importing them itself (pyarrow, pyiceberg's pyarrow I/O, the schema: ~1.5 s of CPU a worker).

They load with the cycle collector paused (a full collection would walk the libraries' objects again and
again), then are frozen out of its reach (``gc.freeze``, as Python's documentation advises before a fork):
the workers' collections never walk them, nor write into their memory pages, which stay shared."""

from pyspark import daemon

from lakeflow.runtime.memory import keep_loaded_modules, modules_loading

keep_loaded_modules()
with modules_loading():
    import lakeflow.compaction.task  # noqa: F401  (loaded before the forks)

if __name__ == "__main__":
    daemon.manager()
