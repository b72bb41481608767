"""The benchmark's 25 jobs, submitted from one ``flink run -py`` client: five rounds of the
harvest test jobs (SQL datagen → filesystem, Kafka-named DataStream, batch, declared sink, SQL
datagen → blackhole), each with its own name. Arguments: work directory, catalog URI."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "harvest_jobs"))

import batch  # noqa: E402
import declared_sink  # noqa: E402
import kafka_named  # noqa: E402
import resubmit  # noqa: E402
import sql_filesystem  # noqa: E402

work, catalog_uri = sys.argv[1:3]
for i in range(5):
    sql_filesystem.submit(f"{work}/archive-{i}", name=f"bench-sql-filesystem-{i}")
    kafka_named.submit(name=f"bench-kafka-named-{i}")
    batch.submit(name=f"bench-batch-{i}")
    declared_sink.submit(f"file://{work}/warehouse/iot/readings-{i}", catalog_uri, name=f"bench-declared-sink-{i}",
                         table=f"readings-{i}")
    resubmit.submit(fail=False, name=f"bench-sql-blackhole-{i}")
