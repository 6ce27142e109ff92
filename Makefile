# Two commands do everything on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test test-cluster unit functional install wheel jars maven java python-venv postgres docs docs-serve docs-check chromium bench bench-cluster bench-diff bench-formats bench-retraction bench-models bench-models-apache bench-run-records soak clean

# PyFlink, the peer decoder of tests/functional/test_peer_flink.py (tests/peers/flink_decode.py):
# apache-flink pins its own pyarrow, pandas and numpy, so it gets its own virtual environment,
# which the tests run as a subprocess; they fail without LOGSTORE_FLINK_PYTHON.
# 2.2.1: Flink's Kafka connector is published for Flink 2.2 (5.0.0-2.2, jars/flink-kafka/pom.xml),
# not for 2.3.
FLINK_VERSION := 2.2.1
FLINK_VENV  := .venv-flink
FLINK_STAMP := $(FLINK_VENV)/.installed-$(FLINK_VERSION)
FLINK_ENV   := LOGSTORE_FLINK_PYTHON=$(CURDIR)/$(FLINK_VENV)/bin/python

# The newest pyspark, which `pip install` without constraints.txt brings, in a venv of its own for
# tests/functional/test_pyspark_4_3.py (its dbt and dbt-logstore run as subprocesses; it fails
# without this venv): this checkout, editable, with '[broker]', nothing else pinned.
PYSPARK43_VERSION := 4.3.0
PYSPARK43_VENV    := .venv-pyspark43
PYSPARK43_STAMP   := $(PYSPARK43_VENV)/.installed-$(PYSPARK43_VERSION)

# Debian's packages the targets below install when they are missing, with sudo when not root.
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)

# Python's venv module (Debian's python3 has it in the package python3-venv) and a Java for Spark
# (Spark 4 needs 17 or later: Debian's openjdk-17-jdk-headless), each installed when missing.
python-venv:
	@$(PYTHON) -c 'import ensurepip, venv' 2>/dev/null || { \
		echo "Installing Debian's python3-venv package (make creates .venv)"; \
		$(SUDO) apt-get update -qq && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv; }

java:
	@command -v java >/dev/null 2>&1 || { \
		echo "Installing Debian's openjdk-17-jdk-headless package (Spark's JVM)"; \
		$(SUDO) apt-get update -qq && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jdk-headless; }

$(BIN)/python: | python-venv
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# editable_mode=compat: dbt's pkgutil namespace packages need the source tree on sys.path
$(STAMP): $(BIN)/python pyproject.toml constraints.txt
	$(BIN)/pip install --quiet -c constraints.txt -e '.[test,broker]' --config-settings editable_mode=compat
	touch $(STAMP)

install: $(STAMP)

# The wheel, into dist/: dist/dbt_logstore-<version>-py3-none-any.whl, to install where the
# package is not published (README.md, Install: pip install 'dist/dbt_logstore-...whl[broker]').
# pip builds it in an isolated environment with pyproject.toml's build requirements; build/ is
# removed first, so that no module deleted since an earlier build is packaged.
wheel: $(BIN)/python
	rm -rf build dist/dbt_logstore-*.whl
	$(BIN)/pip wheel --quiet --no-deps --wheel-dir dist .
	rm -rf build
	@ls dist/dbt_logstore-*.whl

$(FLINK_STAMP): | python-venv
	$(PYTHON) -m venv $(FLINK_VENV) && $(FLINK_VENV)/bin/pip install --quiet apache-flink==$(FLINK_VERSION)
	rm -f $(FLINK_VENV)/.installed*
	touch $(FLINK_STAMP)

$(PYSPARK43_STAMP): pyproject.toml | python-venv
	$(PYTHON) -m venv $(PYSPARK43_VENV) && $(PYSPARK43_VENV)/bin/pip install --quiet -e '.[broker]' \
		pyspark==$(PYSPARK43_VERSION) --config-settings editable_mode=compat
	rm -f $(PYSPARK43_VENV)/.installed*
	touch $(PYSPARK43_STAMP)

# The jars, resolved by Maven from Maven Central into .jars/<name> (pinned in jars/<name>/pom.xml):
# Apache Kafka's broker (tests/kafka_cluster.py), Spark's Kafka source, Flink's Kafka connector,
# the Iceberg and Delta runtimes (on the tests' Spark class path: tests/table_formats.py),
# Kafka Connect's worker and Debezium's JDBC sink, a plugin in the worker's plugin.path
# .jars/connect-plugins (tests/kafka_connect.py), and Hive's LLAP classes for the tests' Spark
# Thrift Server (tests/functional/thrift_server.py; Spark 4 no longer ships them).
# kafka-3.9: Apache Kafka 3.9's broker beside 4.x's (tests/functional/test_kafka_versions.py).
JAR_SETS  := kafka kafka-3.9 spark-kafka flink-kafka iceberg delta connect connect-plugins/debezium-jdbc hive-llap
JARS_STAMP := .jars/.installed
$(JARS_STAMP): $(foreach j,$(JAR_SETS),jars/$(j)/pom.xml) | maven
	for j in $(JAR_SETS); do rm -rf .jars/$$j && \
		mvn -q -B -f jars/$$j/pom.xml dependency:copy-dependencies -DincludeScope=runtime \
			-DoutputDirectory=$(CURDIR)/.jars/$$j || exit 1; done
	touch $(JARS_STAMP)

jars: $(JARS_STAMP)

# Maven, which resolves the jars above: Debian's `maven` package, installed only when no `mvn`
# is on the PATH (with sudo when not root).
maven:
	@command -v mvn >/dev/null 2>&1 || { \
		echo "Installing Debian's maven package (the jars: make jars)"; \
		$(SUDO) apt-get update -qq && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq maven; }

# PostgreSQL, the target of the Kafka Connect JDBC sink test (tests/postgres.py starts a throwaway
# server from these binaries): Debian's `postgresql` package, installed only when no server is
# found under /usr/lib/postgresql (with sudo when not root).
postgres:
	@ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || { \
		echo "Installing Debian's postgresql package (tests/postgres.py)"; \
		$(SUDO) apt-get update -qq && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql; }

demo: $(STAMP) java
	$(BIN)/python sample_project/demo.py

# The documentation site (mkdocs.yml, pages in docs/) into site/: --strict fails on a broken link
# or anchor; its hooks render the configuration reference from the code (docs/hooks/).
DOCS_STAMP := $(VENV)/.docs-installed
DOCS_ENV   := NO_MKDOCS_2_WARNING=1
$(DOCS_STAMP): $(STAMP)
	$(BIN)/pip install --quiet -c constraints.txt -e '.[test,broker,docs]' --config-settings editable_mode=compat
	touch $(DOCS_STAMP)

docs: $(DOCS_STAMP)
	$(DOCS_ENV) $(BIN)/mkdocs build --strict

# The site at http://127.0.0.1:8000/, rebuilt as its pages change. site/index.html opened from disk
# works too (pages are files, and the search runs from file://), so this is for writing the docs.
docs-serve: $(DOCS_STAMP)
	$(DOCS_ENV) $(BIN)/mkdocs serve --dev-addr 127.0.0.1:8000

# Chromium, for the site's layout check (tests/docs/test_layout.py drives it through chromedriver):
# Debian's `chromium` and `chromium-driver`, installed only when /usr/bin/chromium or
# /usr/bin/chromedriver is missing (with sudo when not root).
chromium:
	@test -x /usr/bin/chromium -a -x /usr/bin/chromedriver || { \
		echo "Installing Debian's chromium and chromium-driver (tests/docs/test_layout.py)"; \
		$(SUDO) apt-get update -qq && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver; }

# The site built, then every page loaded by headless Chromium at 1280 and 390 pixels: no table,
# code block or image wider than the content column, no wrapped code, no table cell narrower than
# its longest word, no plot text under 11 px; and site/index.html from disk reaches every page in
# two clicks, its search working (tests/docs/test_layout.py).
docs-check: $(DOCS_STAMP) chromium
	$(DOCS_ENV) $(BIN)/mkdocs build --strict
	$(BIN)/python -m pytest tests/docs -p no:cacheprovider -q

# Apache Kafka (three KRaft nodes, tests/kafka_cluster.py) runs for the whole suite, shared by the
# workers, for the modules marked apache_kafka. Four workers, a file each at a time: every worker
# has its own Spark session, metastore and embedded broker, and the subprocess-heavy fault tests run beside the rest (four on two cores:
# 15.5-18.5 minutes against 19.4 on three, 2026-11-24; the workers also wait on subprocesses). The standalone
# cluster test (tests/functional/test_standalone_cluster.py: a master, two workers, the Thrift Server
# and each run's executors) is part of it.
# --no-loadscope-reorder: files go out in tests/conftest.py's order, longest first; xdist's
# own order (most tests first) started the one-test fault files last, alone at the end.
# First the documentation site is built, --strict (as `make docs`): a broken link fails the suite;
# then its layout is checked (as `make docs-check`), and the suite runs without tests/docs.
test: $(STAMP) $(DOCS_STAMP) $(FLINK_STAMP) $(PYSPARK43_STAMP) $(JARS_STAMP) java postgres chromium
	$(DOCS_ENV) $(BIN)/mkdocs build --strict
	$(BIN)/python -m pytest tests/docs -p no:cacheprovider -q
	$(FLINK_ENV) LOGSTORE_KILL_SEED=$${LOGSTORE_KILL_SEED:-20261123} $(BIN)/python -m tests.kafka_cluster run -- \
		$(BIN)/python -m pytest tests --ignore=tests/docs -p no:cacheprovider -q -n 4 --dist loadfile --no-loadscope-reorder --durations=25

# The standalone Spark cluster's tests alone (tests/functional/test_standalone_cluster.py): both methods on
# a master and two workers, and random kills of an executor and of dbt (LOGSTORE_CLUSTER_ROUNDS, default 1).
test-cluster: $(STAMP) $(JARS_STAMP)
	$(BIN)/python -m tests.kafka_cluster run -- $(BIN)/python -m pytest tests -p no:cacheprovider -q -m cluster

# Random kills (tests/functional/test_faults_random.py) for as long as you like:
# make soak ROUNDS=50 [SEED=N]; the rounds are written to soak-report.txt as they pass.
# SOAK_TESTS=tests/functional/test_standalone_cluster.py: executor and dbt kills on the standalone cluster.
# SOAK_TESTS="tests/functional/test_faults_random_iceberg.py tests/functional/test_faults_random_delta.py":
# the same on Iceberg and on Delta.
# SOAK_TESTS=tests/functional/test_faults_generations.py: kills while a generation is written
# (a restart after a lost log, logstore_resnapshot).
ROUNDS ?= 50
SOAK_TESTS ?= tests/functional/test_faults_random.py
soak: $(STAMP) $(JARS_STAMP)
	rm -f soak-report.txt
	LOGSTORE_KILL_ROUNDS=$(ROUNDS) LOGSTORE_CLUSTER_ROUNDS=$(ROUNDS) LOGSTORE_KILL_SEED=$(SEED) LOGSTORE_KILL_REPORT=$(CURDIR)/soak-report.txt \
		$(BIN)/python -m tests.kafka_cluster run -- $(BIN)/python -m pytest $(SOAK_TESTS) -p no:cacheprovider -q -s

unit: $(STAMP)
	$(BIN)/python -m pytest tests/unit -q

functional: $(STAMP) $(FLINK_STAMP) $(PYSPARK43_STAMP) $(JARS_STAMP) postgres
	$(FLINK_ENV) $(BIN)/python -m tests.kafka_cluster run -- $(BIN)/python -m pytest tests/functional -q

# The mirror benchmark (benchmarks/mirror.py): starts the embedded broker, prints a table of
# throughput, ratios to the raw producer and peak memory, writes benchmarks/results.json and its
# plots in benchmarks/plots/ (the bench extra's matplotlib; again from a saved result:
# $(BIN)/python benchmarks/plots.py FILE). BENCH_ARGS=--quick for a short run (into
# benchmarks/results-quick.json and plots/quick-*.png, which git ignores);
# BENCH_ARGS="--brokers embedded,apache" measures on the embedded broker and on Apache Kafka.
BENCH_STAMP := $(VENV)/.bench-installed
$(BENCH_STAMP): $(STAMP)
	$(BIN)/pip install --quiet -c constraints.txt -e '.[test,broker,bench,confluent]' --config-settings editable_mode=compat
	touch $(BENCH_STAMP)

bench: $(BENCH_STAMP) $(JARS_STAMP)
	$(BIN)/python benchmarks/mirror.py $(BENCH_ARGS)

# The cluster benchmark (benchmarks/cluster.py): on a standalone Spark cluster (a master and two
# workers of one core, tests/functional/spark_cluster.py), the same change set (a keyed table's
# first build) written to the same broker by the session-method mirror (one writer, two Spark
# tasks), the thrift-method mirror (through a Spark Thrift Server on the cluster) and Spark's own
# Kafka writer (DataFrame.write.format("kafka"), and INSERT INTO a kafka table over the Thrift
# Server), one after the other in one run: records/s, ratios, CPU per record, peak memory; into
# benchmarks/results-cluster.json (and under "cluster" in benchmarks/results.json) and its plot
# benchmarks/plots/cluster-throughput.png. BENCH_ARGS="--brokers embedded,apache" also on Apache
# Kafka, --quick for 50,000 rows (into benchmarks/results-cluster-quick.json, plots/quick-*.png).
bench-cluster: $(BENCH_STAMP) $(JARS_STAMP)
	$(BIN)/python benchmarks/cluster.py $(BENCH_ARGS)

# The change-set benchmark (benchmarks/diff.py): a keyed rebuild's diff, JSON images against
# typed rows and against the least a diff does (a join of keys and row hashes), next to the
# CTAS of the run without the log, side by side in one Spark session (no broker).
bench-diff: $(STAMP)
	$(BIN)/python benchmarks/diff.py $(BENCH_ARGS)

# The change-feed benchmark (benchmarks/change_feeds.py): a keyed rebuild's change set as the log
# computes it, next to Delta's Change Data Feed and Iceberg's changelog view of the same change
# made by CREATE OR REPLACE and by MERGE, each format in a Spark session of its own (no broker).
bench-formats: $(STAMP) $(JARS_STAMP)
	$(BIN)/python benchmarks/change_feeds.py $(BENCH_ARGS)

# The retraction benchmark (benchmarks/retraction.py): a keyed model's log re-based on a topic that
# still holds its 1M keys (`log.on-lost: restart` after its table was dropped and rebuilt with 90%
# of its rows), next to the same run on a fresh topic: run and retraction seconds, driver and JVM
# peak memory, as ratios; writes benchmarks/results-retraction.json and .txt.
# BENCH_ARGS=--quick for 100,000 rows, "--brokers apache" on three Apache Kafka nodes.
bench-retraction: $(BENCH_STAMP) $(JARS_STAMP)
	$(BIN)/python benchmarks/retraction.py $(BENCH_ARGS)

# The small-models benchmark (benchmarks/models.py): what a log costs an ordinary small model.
# In one run, interleaved, plain dbt-spark and dbt-logstore (every model logged, transactional,
# on the embedded broker) build 12 keyed table models of 200 rows, an incremental merge model
# (Delta) and a keyless table, then rebuild them with every row changed, with the session method,
# behind a Spark Thrift Server and on a Spark Connect server: seconds and SQL statements a model,
# logged / plain; writes benchmarks/results-models.json. BENCH_ARGS=--quick for 3 models
# (results-models-quick.json), "--methods session" for one method.
bench-models: $(STAMP) $(JARS_STAMP)
	$(BIN)/python benchmarks/models.py $(BENCH_ARGS)

# The same on Apache Kafka (3 nodes, tests/kafka_cluster.py), the session method:
# writes benchmarks/results-models-apache.json.
bench-models-apache: $(STAMP) $(JARS_STAMP)
	$(BIN)/python benchmarks/models.py --broker apache --methods session \
	  --results benchmarks/results-models-apache.json $(BENCH_ARGS)

# What a run record costs: its write, and the other models' latest confirmations read with one
# consumer against one each (docs/performance.md), on a three-node Apache Kafka of its own.
bench-run-records: $(STAMP) $(JARS_STAMP)
	$(BIN)/python benchmarks/run_records.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) $(FLINK_VENV) $(PYSPARK43_VENV) .jars site dist build sample_project/target sample_project/logs
