# lakeflow — every target installs what it needs first (a virtualenv in .venv).
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cksum < pyproject.toml | cut -d' ' -f1)
JAR := build/lakeflow-flink.jar
JAVA_SRC := $(shell find java -name '*.java' 2>/dev/null)
PYFLINK_DIR = $(shell $(PY) -c 'import pyflink, os; print(os.path.dirname(pyflink.__file__))')

export PATH := $(abspath $(VENV))/bin:$(PATH)
export SPARK_LOCAL_IP ?= 127.0.0.1
export PYTHONUNBUFFERED := 1

.PHONY: help install run test test-fast jar package cluster-up cluster-down flink-plugins \
        compact harvest stack bench bench-ingest bench-compact bench-harvest chaos clean

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | column -t -s $$'\t'

$(STAMP):
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -e '.[test]'
	@rm -f $(VENV)/.installed-* && touch $@

install: $(STAMP) $(if $(JAVA_SRC),$(JAR))  ## create .venv and install lakeflow with its test extras

$(JAR): $(STAMP) $(JAVA_SRC)
	@mkdir -p build/classes
	javac -nowarn --release 11 -d build/classes -cp '$(PYFLINK_DIR)/lib/*:$(PYFLINK_DIR)/opt/*' $(JAVA_SRC)
	jar cf $@ -C build/classes .

jar: $(JAR)  ## build the Flink JSON-array bulk writer jar

run: install  ## run the sensor ingestion job (reads .env.local; embedded local catalog by default)
	$(PY) jobs/sensor_ingest.py $(ARGS)

test: install  ## run the test suite (real Flink, Spark, moto; ~10 min on 2 cores)
	$(PY) -m pytest $(PYTEST_ARGS)

test-fast: install  ## the tests that start no Flink cluster or spark-submit
	$(PY) -m pytest -m 'not slow' $(PYTEST_ARGS)

clean:  ## remove build output (keeps .venv and .lakeflow)
	rm -rf build dist *.egg-info

cluster-up: install  ## start a local standalone Flink cluster (REST on localhost:$FLINK_REST_PORT, default 8081)
	$(PY) -m lakeflow.flink_cluster up

cluster-down:  ## stop the local standalone Flink cluster
	$(PY) -m lakeflow.flink_cluster down
