"""spark-submit job for tests/integration/test_credential_refresh.py: S3A writes and reads through the profile
credentials provider, twice, with a pause longer than the vended credentials' refresh point between.

    spark-submit s3a_refresh_job.py s3a://bucket/table-prefix PAUSE_SECONDS
"""

import sys
import time

from pyspark.sql import SparkSession

base, pause = sys.argv[1].rstrip("/"), float(sys.argv[2])
spark = SparkSession.builder.appName("s3a-refresh").getOrCreate()
spark.range(10).write.mode("overwrite").json(f"{base}/before")
time.sleep(pause)
spark.range(5).write.mode("overwrite").json(f"{base}/after")
print(f"rows before={spark.read.json(f'{base}/before').count()} after={spark.read.json(f'{base}/after').count()}")
spark.stop()
