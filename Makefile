# scalewall: two commands do everything: `make report` and `make test`.
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# dvc.yaml's commands say `python -m pipeline ...`: run them with the project's interpreter.
export PATH := $(CURDIR)/$(BIN):$(PATH)

.PHONY: help setup report test bench clean

help:  ## list the targets
	@echo "make report   run the pipeline (dvc repro) and write reports/report.html"
	@echo "make test     the import contracts and the whole test suite"
	@echo "make bench    measure the performance figures and write docs/benchmarks.md"
	@echo "make setup    only create .venv with the pinned dependencies"
	@echo "make clean    remove the processed data, figures and report"
	@echo "make help     this list"

# Re-install only when pyproject.toml or the pinned versions of every dependency change.
# constraints.txt is `pip freeze` of a working environment: the same versions on every machine.
$(STAMP): pyproject.toml constraints.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[dev]'
	@touch $(STAMP)

setup: $(STAMP)

# preflight: a FIFO or device under data/ would make DVC hang while hashing (pipeline/preflight.py).
# Then `dvc repro` through DVC's API, without its "git add dvc.lock" and "dvc push" advice (see
# pipeline/reproduce.py); plain `dvc repro` works the same otherwise.
report: $(STAMP)
	$(BIN)/python -m pipeline preflight
	$(BIN)/python -m pipeline.reproduce
	@echo "Report: $(CURDIR)/reports/report.html (Markdown: $(CURDIR)/reports/report.md)"

# The import contracts (.importlinter) first, then every test, the slow ones included, naming
# the ten slowest. The tests run in one worker process per core (pytest-xdist, at most 4), a whole
# file to a worker, longest files first (tests/conftest.py); tests/shared_run.py builds each shared
# pipeline run once for all workers. The fast suite alone: `python -m pytest -q -m "not slow"`.
test: $(STAMP)
	$(BIN)/lint-imports
	$(BIN)/python -m pytest -q -n auto --maxprocesses 4 --dist loadfile --no-loadscope-reorder --durations=10

# Every benchmark in its own process; their figures are written to docs/benchmarks.md.
bench: $(STAMP)
	$(BIN)/python -m benchmarks

clean:
	rm -rf data/processed reports/figures reports/report.html reports/report.md
