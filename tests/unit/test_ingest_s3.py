"""The ingestion job writing S3 for real: Flink's flink-s3-fs-hadoop plugin (S3A of Hadoop 3.3.4, AWS
SDK v1) and its recoverable writer, against moto with IAM enforced, through a Lakekeeper stand-in
that vends STS credentials scoped to the table's prefix.

Unit tests: they start no process. The real-process tests: tests/integration/test_ingest_s3.py."""

from __future__ import annotations

import pytest


def test_a_cluster_is_checked_against_the_tables_endpoint(caplog: pytest.LogCaptureFixture):
    from lakeflow.ingest import IngestError
    from lakeflow.ingest.storage import CREDENTIAL_COMMAND, check_cluster

    table = {"fs.s3a.endpoint": "http://minio:9000", "fs.s3a.access.key": "AKIA"}
    where, location = "the Flink cluster at http://localhost:8081", "s3://lake/wh/t"
    keyless = {"fs.s3a.endpoint": "http://MINIO:9000/", CREDENTIAL_COMMAND: "lakeflow"}
    check_cluster(location, table, keyless, where)  # same host, the tables' own filesystems: fine
    check_cluster(location, table, {"s3.endpoint": "minio:9000", CREDENTIAL_COMMAND: "lakeflow"}, where)  # s3.*
    check_cluster(location, table, {}, where)  # YARN / Kubernetes: not checked
    for conf in ({"rest.port": "8081"}, {"fs.s3a.endpoint": "http://other:9000", "fs.s3a.access.key": "k"},
                 {"fs.s3a.endpoint": "http://minio:9000", "fs.s3a.access.key": "k"}):  # vended keys, no command
        with pytest.raises(IngestError, match="lakeflow flink up") as refused:
            check_cluster(location, table, conf, where)
        assert where in str(refused.value) and location in str(refused.value) and "AKIA" not in str(refused.value)
    with caplog.at_level("WARNING", logger="lakeflow.ingest.storage"):  # AWS S3 (no endpoint), no credentials
        check_cluster(location, {"fs.s3a.endpoint.region": "eu-west-1"}, {"rest.port": "8081"}, where)
    assert "names no S3 credentials" in caplog.text
