# syntax=docker/dockerfile:1
# The ingestion job's image, for Flink's Kubernetes operator (docs/deploy.md): Flink 2.3 on Java 17,
# Python 3.11 (uv's build: the Flink image has none), the locked ingestion environment
# (envs/ingestion/requirements.txt: apache-flink of the image's Flink version, hashes required),
# lakeflow itself, its JVM helpers jar and the job file. Build from the repository root after
# `make package` (it builds build/lakeflow-flink.jar):
#   docker build -f deploy/docker/ingestion.Dockerfile -t lakeflow-ingestion .
# FLINK_IMAGE's version must be the lock's apache-flink version (tests/test_deploy.py checks it).
ARG FLINK_IMAGE=flink:2.3.0-scala_2.12-java17
ARG UV_IMAGE=ghcr.io/astral-sh/uv:0.13.8

FROM ${UV_IMAGE} AS uv

FROM ${FLINK_IMAGE}
COPY --from=uv /uv /usr/local/bin/uv
ENV UV_PYTHON_INSTALL_DIR=/opt/python UV_LINK_MODE=copy UV_COMPILE_BYTECODE=1
RUN uv python install 3.11 && uv venv --python 3.11 /opt/lakeflow
COPY envs/ingestion/requirements.txt /tmp/lakeflow/requirements.txt
RUN uv pip install --python /opt/lakeflow/bin/python --require-hashes -r /tmp/lakeflow/requirements.txt
COPY pyproject.toml README.md /tmp/lakeflow/
COPY lakeflow /tmp/lakeflow/lakeflow
RUN uv pip install --python /opt/lakeflow/bin/python --no-deps /tmp/lakeflow && rm -rf /tmp/lakeflow
# the job and the JVM helpers it loads (LAKEFLOW_JAR); S3 through Flink's own plugin from opt/
COPY build/lakeflow-flink.jar jobs/sensor_ingest.py /opt/flink/usrlib/
RUN mkdir -p /opt/flink/plugins/s3-fs-hadoop \
    && cp /opt/flink/opt/flink-s3-fs-hadoop-*.jar /opt/flink/plugins/s3-fs-hadoop/ \
    && chown -R flink:flink /opt/flink/usrlib /opt/flink/plugins/s3-fs-hadoop
ENV LAKEFLOW_JAR=/opt/flink/usrlib/lakeflow-flink.jar PATH=/opt/lakeflow/bin:$PATH
