# syntax=docker/dockerfile:1
# The compaction job's image, for Spark on Kubernetes (the Spark operator's SparkApplication or
# spark-submit --master k8s://…; docs/deploy.md): Apache Spark 4 with Python 3.11 (uv's build: the
# Spark image's Python is older), the locked compaction environment (envs/compaction/requirements.txt:
# pyspark of the image's Spark version, pyarrow, pyiceberg; hashes required), lakeflow, the job file
# and the S3A jars (hadoop-aws + AWS SDK v2 of `make s3a-jars`, for s3:// raw tables). Build from the
# repository root after `make s3a-jars`:
#   docker build -f deploy/docker/compaction.Dockerfile -t lakeflow-compaction .
# SPARK_IMAGE's version must be the lock's pyspark version (tests/test_deploy.py checks it).
ARG SPARK_IMAGE=apache/spark:4.3.0-python3
ARG UV_IMAGE=ghcr.io/astral-sh/uv:0.13.8

FROM ${UV_IMAGE} AS uv

FROM ${SPARK_IMAGE}
USER root
COPY --from=uv /uv /usr/local/bin/uv
ENV UV_PYTHON_INSTALL_DIR=/opt/python UV_LINK_MODE=copy UV_COMPILE_BYTECODE=1
RUN uv python install 3.11 && uv venv --python 3.11 /opt/lakeflow
COPY envs/compaction/requirements.txt /tmp/lakeflow/requirements.txt
RUN uv pip install --python /opt/lakeflow/bin/python --require-hashes -r /tmp/lakeflow/requirements.txt
COPY pyproject.toml README.md /tmp/lakeflow/
COPY lakeflow /tmp/lakeflow/lakeflow
RUN uv pip install --python /opt/lakeflow/bin/python --no-deps /tmp/lakeflow && rm -rf /tmp/lakeflow
COPY jobs/compact.py /opt/lakeflow/jobs/compact.py
COPY build/jars/spark-hadoop-*/*.jar /opt/spark/jars/
ENV PYSPARK_PYTHON=/opt/lakeflow/bin/python PYSPARK_DRIVER_PYTHON=/opt/lakeflow/bin/python \
    PATH=/opt/lakeflow/bin:$PATH
USER spark
