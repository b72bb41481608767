"""Submit every harvest test job from one client (one `flink run -py`: ~15 s instead of ~15 s
per job). Arguments: archive directory, declared-sink location, catalog URI."""
import sys

import batch
import declared_sink
import kafka_named
import resubmit
import sql_filesystem
import sql_print

archive, location, catalog_uri = sys.argv[1:4]
sql_filesystem.submit(archive)
sql_print.submit(archive)
kafka_named.submit()
resubmit.submit(fail=True)
resubmit.submit(fail=False)
batch.submit()
declared_sink.submit(location, catalog_uri)
