# Two commands do everything on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test unit functional install bench bench-diff clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# editable_mode=compat: dbt's pkgutil namespace packages need the source tree on sys.path
$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install --quiet -e '.[test,broker]' --config-settings editable_mode=compat
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/python sample_project/demo.py

# Two workers, a file each at a time: every worker has its own Spark session, metastore and
# embedded broker, and the subprocess-heavy fault tests run beside the rest.
test: $(STAMP)
	$(BIN)/python -m pytest tests -p no:cacheprovider -q -n 2 --dist loadfile

unit: $(STAMP)
	$(BIN)/python -m pytest tests/unit -q

functional: $(STAMP)
	$(BIN)/python -m pytest tests/functional -q

# The mirror benchmark (benchmarks/mirror.py): starts the embedded broker, prints a table of
# throughput, ratios to the raw producer and peak memory. BENCH_ARGS=--quick for a short run.
BENCH_STAMP := $(VENV)/.bench-installed
$(BENCH_STAMP): $(STAMP)
	$(BIN)/pip install --quiet -e '.[test,broker,bench,confluent]' --config-settings editable_mode=compat
	touch $(BENCH_STAMP)

bench: $(BENCH_STAMP)
	$(BIN)/python benchmarks/mirror.py $(BENCH_ARGS)

# The change-set benchmark (benchmarks/diff.py): a keyed rebuild's diff, JSON images against
# typed rows, side by side in one Spark session (no broker).
bench-diff: $(STAMP)
	$(BIN)/python benchmarks/diff.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) sample_project/target sample_project/logs
