# Two commands do everything on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test unit functional install clean

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

test: $(STAMP)
	$(BIN)/python -m pytest tests -p no:cacheprovider -q

unit: $(STAMP)
	$(BIN)/python -m pytest tests/unit -q

functional: $(STAMP)
	$(BIN)/python -m pytest tests/functional -q

clean:
	rm -rf $(VENV) sample_project/target sample_project/logs
