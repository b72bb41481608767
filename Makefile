# lakeflow — every target installs what it needs first. Two locked environments (docs/environments.md):
#   .venv        the development one: the compaction job's environment (envs/compaction) + the test
#                tools (envs/dev/requirements.txt) + lakeflow (editable); the `lakeflow` command
#   .venv-flink  the ingestion job's environment (envs/ingestion/requirements.txt) + lakeflow
#                (editable): runs jobs/sensor_ingest.py; its pyflink is the Flink that `lakeflow flink up` starts
# uv (pinned, in build/tools with venv-pack) installs each exactly as locked.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
INGEST_VENV ?= .venv-flink
PY := $(VENV)/bin/python
INGEST_PY := $(INGEST_VENV)/bin/python
UV_VERSION := 0.13.8
VENV_PACK_VERSION := 0.2.0
TOOLS := build/tools
UV := $(TOOLS)/bin/uv
UV_COMPILE = $(UV) pip compile -q pyproject.toml --generate-hashes --python-version 3.11 \
	--python-platform x86_64-manylinux_2_28 --no-header --annotation-style line
# lakeflow_native (rust/): the compaction's compiled decoder, a wheel built where cargo is (docs/compaction.md)
NATIVE_SRC := rust/Cargo.toml rust/Cargo.lock rust/pyproject.toml $(wildcard rust/src/*.rs)
NATIVE_WHEEL := $(if $(shell command -v cargo 2>/dev/null),build/wheels/.native-$(shell cat $(NATIVE_SRC) | cksum | cut -d' ' -f1))
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml envs/dev/requirements.txt $(NATIVE_SRC) | cksum | cut -d' ' -f1)
INGEST_STAMP := $(INGEST_VENV)/.installed-$(shell cat pyproject.toml envs/ingestion/requirements.txt | cksum | cut -d' ' -f1)
JAR := build/lakeflow-flink.jar
PACKAGE_ZIP := build/lakeflow.zip
INGEST_ENV_ARCHIVE := build/ingestion-env.tar.gz
COMPACT_ENV_ARCHIVE := build/compaction-env.tar.gz
JAVA_SRC := $(shell find java -name '*.java' 2>/dev/null)
KAFKA_CONNECTOR_DIR := build/jars/flink-sql-connector-kafka-5.0.0-2.2
FLINK_S3_DIR := build/jars/flink-2.3.0
PYFLINK_DIR = $(shell $(INGEST_PY) -c 'import pyflink, os; print(os.path.dirname(pyflink.__file__))')

export PATH := $(abspath $(VENV))/bin:$(PATH)
export SPARK_LOCAL_IP ?= 127.0.0.1
export PYTHONUNBUFFERED := 1

.PHONY: help install run demo test test-prereqs maven lint test-fast jar package cluster-up cluster-down flink-plugins \
        compact harvest stack bench-ingest bench-compact bench-longrun bench-harvest bench-freshness bench-fleet soak chaos clean lock

help:  ## list the targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | column -t -s $$'\t'

$(UV):
	@command -v $(PYTHON) >/dev/null || { echo "prerequisite missing: $(PYTHON) not found; lakeflow needs Python 3.11 (and Linux): install it and name it, e.g. make run PYTHON=python3.11" >&2; exit 1; }
	@$(PYTHON) lakeflow/prereqs.py
	rm -rf $(TOOLS) && $(PYTHON) -m venv $(TOOLS)
	$(TOOLS)/bin/python -m pip install -q --disable-pip-version-check uv==$(UV_VERSION) venv-pack==$(VENV_PACK_VERSION)

# A venv ($1) holding exactly the lock file $2 (uv pip sync), then lakeflow editable ($3: -e) or not.
# Bytecode is compiled at install: where it is not written at import (PYTHONDONTWRITEBYTECODE, a
# read-only or unpacked-per-task environment), every command would compile its imports again (~1 s).
define locked_venv
	@test -x $(1)/bin/python || $(PYTHON) -m venv --without-pip $(4) $(1)
	$(UV) pip sync -q --compile-bytecode --python $(1)/bin/python $(2)
	$(UV) pip install -q --python $(1)/bin/python --no-deps $(3) .
endef

$(NATIVE_WHEEL): | $(UV)
	rm -rf build/wheels && $(UV) build -q --wheel rust -o build/wheels && touch $@

# The compiled decoder into a venv ($1), where it was built (without it lakeflow parses the same, slower)
define native_decoder
	$(if $(NATIVE_WHEEL),$(UV) pip install -q --python $(1)/bin/python --no-deps build/wheels/lakeflow_native-*.whl,@echo "cargo not found: the compaction parses without its compiled decoder (slower; docs/compaction.md)")
endef

$(STAMP): | $(UV) $(NATIVE_WHEEL)
	$(call locked_venv,$(VENV),envs/dev/requirements.txt,-e)
	$(call native_decoder,$(VENV))
	$(VENV)/bin/python -m compileall -q lakeflow jobs >/dev/null  # lakeflow's own (editable: both venvs import it from here)
	@rm -f $(VENV)/.installed-* && touch $@

$(INGEST_STAMP): | $(UV)
	$(call locked_venv,$(INGEST_VENV),envs/ingestion/requirements.txt,-e)
	@rm -f $(INGEST_VENV)/.installed-* && touch $@

lock: $(UV)  ## re-resolve the lock files envs/{ingestion,compaction,dev}/requirements.txt from pyproject.toml's extras
	$(UV_COMPILE) --extra ingest -o envs/ingestion/requirements.txt
	$(UV_COMPILE) --extra compact -o envs/compaction/requirements.txt
	$(UV_COMPILE) --extra compact --extra test -c envs/compaction/requirements.txt -o envs/dev/requirements.txt

install: $(STAMP) $(INGEST_STAMP) $(if $(JAVA_SRC),$(JAR))  ## create .venv (compaction env + test tools + lakeflow) and .venv-flink (ingestion env + lakeflow), each as locked

# KafkaMessages is compiled against Flink's Kafka connector (fetched once, checksums verified);
# only a job with SOURCE=kafka loads it, with the connector beside it. lakeflow.flink.fs (the
# lakeflow-s3 scheme: a filesystem per table) against flink-s3-fs-hadoop, beside which it is installed.
$(JAR): $(STAMP) $(INGEST_STAMP) $(JAVA_SRC)
	@mkdir -p build/classes
	$(VENV)/bin/lakeflow jars kafka-connector flink
	javac -nowarn --release 11 -d build/classes -cp '$(PYFLINK_DIR)/lib/*:$(PYFLINK_DIR)/opt/*:$(KAFKA_CONNECTOR_DIR)/*:$(FLINK_S3_DIR)/*' $(JAVA_SRC)
	cp -R java/META-INF build/classes/
	jar cf $@ -C build/classes .

jar: $(JAR)  ## build the Flink JSON-array bulk writer jar

# A fresh clone (no .env.local, NUM_RECORDS unset) runs a bounded demo of 1,000 readings, 50 a second
# (the settings' own pace, 10 every 15 s, would take 25 minutes); BATCH_* of the environment win.
FRESH_CLONE = $(if $(or $(NUM_RECORDS),$(wildcard $(or $(LAKEFLOW_ENV_FILE),.env.local))),,yes)
DEMO_RECORDS = $(if $(FRESH_CLONE),NUM_RECORDS=1000 $(if $(BATCH_SIZE),,BATCH_SIZE=50) $(if $(BATCH_INTERVAL_MS),,BATCH_INTERVAL_MS=1000))

# The local Flink job's class archive, built once per ingestion environment (the job's JVM starts ~3 s sooner)
FLINK_CDS_STAMP := build/jars/cds/.flink-$(notdir $(INGEST_STAMP))
$(FLINK_CDS_STAMP): $(INGEST_STAMP) $(if $(JAVA_SRC),$(JAR))
	@$(INGEST_PY) -m lakeflow.cli flink-cds --force || echo "(no class archive: make run starts the same, ~3 s slower)"
	@mkdir -p $(@D) && touch $@

run: install $(FLINK_CDS_STAMP)  ## run the sensor ingestion job with the ingestion environment's Python, .venv-flink (reads .env.local; a fresh clone: embedded local catalog, 1,000 readings at 50/s; duration: docs/benchmarks.md)
	$(DEMO_RECORDS) $(INGEST_PY) jobs/sensor_ingest.py $(ARGS)

test: test-prereqs install lint maven $(PACKAGE_ZIP) $(INGEST_ENV_ARCHIVE) $(COMPACT_ENV_ARCHIVE) s3-jars sql-gateway-jar spark-cds $(FLINK_CDS_STAMP)  ## the Debian packages the tests use, lint, then the test suite (real Flink + SQL Gateway, Spark, moto; Maven, zip, job environment archives and jars fetched/built first; duration: docs/benchmarks.md)
	$(PY) -m pytest $(PYTEST_ARGS)

test-prereqs:  ## install the Debian packages the tests use when missing: chromium, postgresql, prometheus, prometheus-pushgateway (as root or with sudo; else says what to run)
	@bash build-support/test-prereqs.sh

maven: install  ## the Maven that fetches the jars: mvn on PATH, else Apache Maven fetched from Maven Central into build/maven/ (SHA-512 of build-support/maven/)
	@$(PY) -m lakeflow.runtime.maven

lint: install  ## ruff (lint + format check) and mypy on lakeflow/ and jobs/ (settings in pyproject.toml)
	$(VENV)/bin/ruff check lakeflow jobs
	$(VENV)/bin/ruff format --check lakeflow jobs
	$(VENV)/bin/mypy

test-fast: install  ## the unit tests (tests/unit/): no JVM, no subprocess (tests/unit/conftest.py fails one that starts a process)
	$(PY) -m pytest tests/unit $(PYTEST_ARGS)

clean:  ## remove build output, the jobs' environment archives and build/tools included (keeps .venv, .venv-flink and .lakeflow)
	rm -rf build dist *.egg-info

demo: install $(JAR) $(PACKAGE_ZIP)  ## the whole chain, bounded, in one command: Flink cluster, flink run, compact, harvest, query (lakeflow demo; state in $LAKEFLOW_HOME/demo); SOURCE=kafka: from a local Kafka broker's topic
	$(VENV)/bin/lakeflow demo $(if $(SOURCE),--source $(SOURCE)) $(ARGS)

cluster-up: install  ## start a local standalone Flink cluster able to write the table, native lineage on (lakeflow flink up; REST on localhost:$FLINK_REST_PORT, default 8081; + SQL Gateway on 127.0.0.1:$FLINK_SQL_GATEWAY_PORT if set)
	$(VENV)/bin/lakeflow flink up $(ARGS)

cluster-down:  ## stop the local standalone Flink cluster (lakeflow flink down)
	$(VENV)/bin/lakeflow flink down

# --- ingestion (docs/ingestion.md) ---------------------------------------------------------

$(PACKAGE_ZIP): $(STAMP) $(shell find lakeflow -name '*.py')
	@mkdir -p build
	$(PY) -c 'import pathlib, zipfile; z = zipfile.ZipFile("$@", "w", zipfile.ZIP_DEFLATED); [z.write(p) for p in sorted(pathlib.Path("lakeflow").rglob("*.py"))]; z.close()'

# A job's environment for the cluster: a venv (Python copied in, lakeflow installed non-editable) of
# exactly its lock file, packed by venv-pack into the archive `flink run -pyarch` / `spark-submit
# --archives` ship to every host; the unpacked venv stays in build/envs/<job> (the driver's Python).
LAKEFLOW_SRC := pyproject.toml $(shell find lakeflow -name '*.py')
define job_env_archive
	rm -rf build/envs/$(1) $(2) && mkdir -p build/envs
	$(PYTHON) -m venv --copies --without-pip build/envs/$(1)
	$(UV) pip sync -q --compile-bytecode --python build/envs/$(1)/bin/python envs/$(1)/requirements.txt
	$(UV) pip install -q --compile-bytecode --python build/envs/$(1)/bin/python --no-deps --reinstall-package lakeflow .
	$(3)
	$(TOOLS)/bin/venv-pack -q --compress-level 1 -p build/envs/$(1) -o $(2)
endef

$(INGEST_ENV_ARCHIVE): envs/ingestion/requirements.txt $(LAKEFLOW_SRC) | $(UV)
	$(call job_env_archive,ingestion,$@)

$(COMPACT_ENV_ARCHIVE): envs/compaction/requirements.txt $(LAKEFLOW_SRC) $(NATIVE_SRC) | $(UV) $(NATIVE_WHEEL)
	$(call job_env_archive,compaction,$@,$(call native_decoder,build/envs/compaction))

package: install $(JAR) $(PACKAGE_ZIP) $(INGEST_ENV_ARCHIVE) $(COMPACT_ENV_ARCHIVE)  ## build the jar and both jobs' environment archives (build/ingestion-env.tar.gz, build/compaction-env.tar.gz) and print the flink run and spark-submit commands
	@echo "Built $(JAR), $(INGEST_ENV_ARCHIVE) and $(COMPACT_ENV_ARCHIVE): each job ships its own Python environment"
	@echo "(lakeflow inside), so the cluster's hosts need none. Settings and secrets come from the environment /"
	@echo ".env.local, never from these command lines."
	@echo
	@echo "Ingestion, on the cluster of make cluster-up (FLINK_CONF_DIR under LAKEFLOW_HOME):"
	@$(VENV)/bin/lakeflow flink-command
	@echo
	@echo "Compaction, on the cluster of make spark-up (ARGS of lakeflow compact, e.g. --master):"
	@$(VENV)/bin/lakeflow compact --print-command $(ARGS)
	@echo
	@echo "Next: run the first with NUM_RECORDS=1000 in front (bounded; NUM_RECORDS=-1 streams until cancelled),"
	@echo "      then the second, and make harvest (while the cluster runs)"

# --- S3 jars (docs/s3.md): Maven resolves them from Maven Central ($MAVEN_REPO), checksums verified ---
.PHONY: s3-jars sql-gateway-jar connector-jars kafka-broker

s3-jars: install  ## fetch the S3 jars (Flink plugin + hadoop-aws/AWS SDK v2 for Spark) into build/jars/; installs the Flink plugin
	$(VENV)/bin/lakeflow jars flink spark

sql-gateway-jar: install  ## flink-sql-gateway of the wheel's Flink version into build/jars/ (the wheel lacks it; make cluster-up starts it from there)
	$(VENV)/bin/lakeflow jars sql-gateway

connector-jars: install  ## Flink's Kafka and JDBC (PostgreSQL) connectors into build/jars/ (the lineage tests' cluster has them in lib/)
	$(VENV)/bin/lakeflow jars kafka-connector jdbc-connector

kafka-broker: install  ## Apache Kafka's jars into build/jars/ (the local broker of make demo SOURCE=kafka, the tests, the benchmarks)
	$(VENV)/bin/lakeflow jars kafka-broker

flink-plugins: install  ## flink-s3-fs-hadoop of the wheel's Flink version into its plugins/s3-fs-hadoop/ (cached in build/jars/)
	$(VENV)/bin/lakeflow jars flink

bench-ingest: install  ## ingestion throughput vs Flink's datagen → filesystem/json sink; time to the first file of make run; then from a Kafka topic vs Flink's kafka → filesystem/json SQL job (in .venv-flink)
	$(INGEST_PY) bench/bench_ingest.py $(ARGS)
	$(INGEST_PY) bench/bench_ingest_kafka.py $(KAFKA_BENCH_ARGS)

# --- compaction (docs/compaction.md) --------------------------------------------------------
.PHONY: s3a-jars spark-up spark-down spark-cds flink-cds

compact: install  ## compact the raw table's JSON part files into Iceberg (engine auto: pyarrow or Spark local[2]; ARGS=--delete-source …)
	$(VENV)/bin/lakeflow compact $(ARGS)

spark-up: install  ## start a standalone Spark cluster from the pyspark wheel (master spark://127.0.0.1:$SPARK_MASTER_PORT, default 7077; one worker)
	$(VENV)/bin/lakeflow spark up

spark-down:  ## stop the standalone Spark cluster of make spark-up
	$(VENV)/bin/lakeflow spark down

bench-compact: install  ## compaction vs DuckDB, DuckDB → pyiceberg append, a naive PySpark job and a pyarrow script (time, rows/s, peak RSS, CPU) at 1M and 10M readings (BENCH_SIZES=1m,10m; BENCH_BASELINES=duckdb runs DuckDB alone beside lakeflow); the engines' crossover; each engine with 1 % of the readings sent twice (BENCH_DUPLICATES=1); the Spark engine on 1 and 2 standalone workers
	$(PY) bench/bench_compact.py $(ARGS)

bench-longrun: install  ## 300 compaction runs of 20 new files over 200,000 compacted ones: last 50 vs first 50 (goal <= 1.2x), then maintain
	$(PY) bench/bench_longrun.py $(ARGS)

spark-cds: install  ## the Spark driver JVM's class-data-sharing archive (build/jars/cds/; a local session starts ~2.5 s sooner)
	$(VENV)/bin/lakeflow spark-cds

flink-cds: install  ## the local Flink job's class-data-sharing archive (build/jars/cds/; make run builds it once: its first file ~3 s sooner; ARGS=--force rebuilds it)
	$(INGEST_PY) -m lakeflow.cli flink-cds $(ARGS)
	@mkdir -p build/jars/cds && touch $(FLINK_CDS_STAMP)

s3a-jars: install  ## hadoop-aws of pyspark's Hadoop version + AWS SDK v2 modules for Spark's s3a:// (build/jars/spark-hadoop-*/)
	$(VENV)/bin/lakeflow jars spark

.PHONY: iceberg-rest
iceberg-rest: install  ## the tests' Iceberg REST catalog: Apache Iceberg's REST test server 1.11.0 (+ S3FileIO) into build/iceberg-rest/
	$(PY) -m tests.support.iceberg_rest

# --- local Lakekeeper stack (Docker): Lakekeeper + Postgres + MinIO + Keycloak; docs/stack.md ---
DOCKER ?= docker
COMPOSE = $(DOCKER) compose --env-file deploy/stack.env -f deploy/docker-compose.yml
.PHONY: stack-check stack-down

stack-check:
	@command -v $(DOCKER) >/dev/null 2>&1 || { echo "make stack: '$(DOCKER)' not found. The local stack needs Docker Engine with the compose plugin (docs/stack.md); without Docker, point lakeflow at an existing Lakekeeper (docs/oauth.md)." >&2; exit 1; }
	@$(DOCKER) info >/dev/null 2>&1 || { echo "make stack: no Docker engine answers ('$(DOCKER) info' failed). Start Docker, or point lakeflow at an existing Lakekeeper (docs/oauth.md)." >&2; exit 1; }
	@$(DOCKER) compose version >/dev/null 2>&1 || { echo "make stack: '$(DOCKER) compose' is missing: install the Docker compose plugin (v2)." >&2; exit 1; }

stack: stack-check install  ## start Lakekeeper+Keycloak+MinIO+Postgres in Docker, bootstrap warehouse + namespace
	$(COMPOSE) up -d
	$(VENV)/bin/lakeflow stack bootstrap --wait 300 || { $(COMPOSE) ps -a; echo "make stack: bootstrap failed; see: $(COMPOSE) logs lakekeeper keycloak" >&2; exit 1; }
	@echo
	@echo "Next:  $(VENV)/bin/lakeflow stack bootstrap --write-env .env.local   (points lakeflow at the stack)"
	@echo "       $(VENV)/bin/lakeflow doctor                                  (token, table, vended credentials)"
	@echo "       make run                                                      (stream sensor readings into it)"
	@echo "Keycloak admin http://localhost:8080 (admin, STACK_KEYCLOAK_ADMIN_PASSWORD in deploy/stack.env);"
	@echo "MinIO console http://localhost:9001; stop with make stack-down (ARGS=-v also deletes the data)."

stack-down: stack-check  ## stop the local stack (keeps its data; ARGS=-v deletes the volumes too)
	$(COMPOSE) down $(ARGS)

# --- lineage harvest (docs/harvest.md) ------------------------------------------------------
BENCH_DH_VENV := build/bench-datahub-venv
DATAHUB_VERSION ?= 1.7.0.17

harvest: install  ## harvest jobs, runs and lineage from the cluster of make cluster-up (ARGS=--format datahub …)
	$(VENV)/bin/lakeflow harvest --rest-url http://localhost:$${FLINK_REST_PORT:-8081} $(ARGS)

$(BENCH_DH_VENV)/bin/datahub:
	$(PYTHON) -m venv $(BENCH_DH_VENV)
	$(BENCH_DH_VENV)/bin/pip install -q --disable-pip-version-check 'acryl-datahub[flink]==$(DATAHUB_VERSION)'
	$(BENCH_DH_VENV)/bin/python -c 'import datahub.ingestion.source.flink.source'  # the flink source exists

bench-harvest: install $(BENCH_DH_VENV)/bin/datahub  ## lakeflow harvest vs DataHub's flink source on 1,000 replayed jobs: wall and CPU time, lineage edges compared
	$(PY) bench/bench_harvest.py --datahub-venv $(BENCH_DH_VENV) $(ARGS)

# --- long-running safety (docs/operations.md) --------------------------------------------------
bench-freshness: install $(JAR) $(PACKAGE_ZIP)  ## sent → queryable per message: Kafka → ingestion job → compact --every, p50/p95/p99/max vs the goal p99 <= 2·C + P + 5 s (FRESHNESS_MINUTES=10 FRESHNESS_RATE=2000 CHECKPOINT_S=10 COMPACT_EVERY_S=30); build/bench/freshness.{json,png}
	$(PY) bench/bench_freshness.py $(ARGS)

bench-fleet: install $(JAR) $(PACKAGE_ZIP)  ## one pipeline of FLEET_STREAMS (50) Kafka streams, 5 schemas, vs the one-stream job at the same total rate: committed messages/s >= 0.9x, every stream's freshness p99 <= 2·C + P + 5 s, TaskManager/compactor MiB per stream (1, 10, 50 streams), an idle compaction pass over the 50 tables <= 2 s (FLEET_MINUTES=5 FLEET_RATE=2000 FLEET_FORM=pattern|list; ~18 min); build/bench/fleet.json
	$(PY) bench/bench_fleet.py $(ARGS)

soak: install $(JAR) $(PACKAGE_ZIP)  ## not CI: the same pipeline on S3 (moto, expiring credentials) under scheduled faults for SOAK_MINUTES (60): nothing lost or twice, no leftovers, memory/files/run-time trends; build/soak/
	$(PY) bench/soak.py $(ARGS)

chaos: install $(JAR) $(PACKAGE_ZIP)  ## fault injection, real processes: TaskManager kills (one stream, Kafka, a fleet of 20 topics), spark-submit and Spark executor kills, bad files, Lakekeeper/OAuth/Flink REST faults (< 15 min)
	$(PY) -m tests.chaos.run $(ARGS)
