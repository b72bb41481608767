"""Test driver (``python s3_scheme.py OUTSIDE``; Spark launched by lakeflow, as ``lakeflow compact`` does):
the raw table's location exactly as Lakekeeper vends it (``s3://…``) through the Spark session lakeflow
builds for a compaction on S3 — the raw table's vended ``fs.s3a.*`` settings and the hadoop-aws + AWS SDK
v2 jars lakeflow fetched. Prints ``key=value`` lines: the scheme's binding, the FileSystem Hadoop picks,
rows read, rows written under the raw table (then deleted), and whether a write to ``OUTSIDE`` (an
``s3://`` URI outside the raw table) was refused.
"""

import sys

from lakeflow.compaction.spark.read import read_schema
from lakeflow.compaction.spark.session import spark_session
from lakeflow.compaction.source import open_raw
from lakeflow.settings import load_settings


def main(outside: str) -> int:
    raw = open_raw(load_settings())
    spark = spark_session("s3-scheme-check", raw.s3a)
    jvm, conf = spark._jvm, spark._jsc.hadoopConfiguration()
    fs = jvm.org.apache.hadoop.fs.Path(raw.location).getFileSystem(conf)
    print(f"fs.s3.impl={conf.get('fs.s3.impl')}")
    print(f"filesystem={fs.getClass().getName()}")
    print(f"location={raw.location}")
    rows = spark.read.schema(read_schema()).option("multiLine", True).json(f"{raw.location}/2025-11-21--01")
    print(f"rows={rows.count()}")
    out = f"{raw.location}/_scheme-check"
    rows.write.mode("errorifexists").parquet(out)
    print(f"written={spark.read.parquet(out).count()}")
    fs.delete(jvm.org.apache.hadoop.fs.Path(out), True)
    try:
        rows.limit(1).write.mode("errorifexists").parquet(outside)
        print(f"outside=WRITTEN {outside}")
    except Exception as exc:  # py4j's Java error: S3A's AccessDeniedException (403) somewhere in the chain
        text = str(exc)
        print(f"outside={'refused' if 'AccessDenied' in text or '403' in text else 'failed'} {outside}")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
