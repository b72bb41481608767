#!/usr/bin/env bash
# What the test suite needs beyond Python packages, the JDK (a prerequisite: lakeflow/prereqs.py)
# and Maven (fetched by lakeflow/runtime/maven.py): Debian packages, installed here when missing.
# `make test` runs this first. As root, or with passwordless sudo, it installs them with apt-get;
# otherwise it prints one line naming the missing packages and the command to install them, exit 1.
set -euo pipefail

need=()
command -v chromium >/dev/null || command -v chromium-browser >/dev/null \
  || need+=(chromium)  # the headless browser tests/integration/test_lineage_view.py opens the lineage page in
compgen -G '/usr/lib/postgresql/*/bin/pg_ctl' >/dev/null \
  || need+=(postgresql)  # tests/support/postgres_server.py: JDBC tables for the lineage tests
{ command -v prometheus >/dev/null && command -v promtool >/dev/null; } \
  || need+=(prometheus)  # scrapes lakeflow's metrics, tests its alert rules (tests/integration/test_metrics.py)
command -v prometheus-pushgateway >/dev/null \
  || need+=(prometheus-pushgateway)  # a single compaction run pushes its metrics (tests/integration/test_metrics.py)

[ ${#need[@]} -eq 0 ] && exit 0

install="apt-get install -y ${need[*]}"
if ! command -v apt-get >/dev/null; then
  echo "prerequisite missing for make test: ${need[*]} (Debian/Ubuntu packages; no apt-get here: install them with this system's package manager)" >&2
  exit 1
fi
if [ "$(id -u)" = 0 ]; then
  sudo=()
elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
  sudo=(sudo -n)
else
  echo "prerequisite missing for make test: ${need[*]}; install them (as root): sudo apt-get update && sudo $install" >&2
  exit 1
fi
echo "make test: installing ${need[*]} (apt-get)" >&2
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
