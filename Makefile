# scalewall: two commands do everything: `make report` and `make test`.
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: setup report test bench clean

# Re-install only when pyproject.toml changes (idempotent).
$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	@touch $(STAMP)

setup: $(STAMP)

report: $(STAMP)
	$(BIN)/dvc repro
	@echo "Report: $(CURDIR)/reports/report.html (Markdown: $(CURDIR)/reports/report.md)"

test: $(STAMP)
	$(BIN)/python -m pytest

bench: $(STAMP)
	$(BIN)/python -m benchmarks

clean:
	rm -rf data/processed/* reports/figures/* reports/plots/* reports/metrics/*
