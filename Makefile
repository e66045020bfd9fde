# Quick start:  make demo   (install, run the default experiment, print the table)
#               make test   (install test extras, run the test suite)
#               make lint   (snakemake --lint on every config, snakefmt and ruff on the code)
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
CORES ?= 2
# torch is pinned to the CPU wheel's version (2.13.0) in pyproject.toml; installing it first, by
# itself, keeps pip from resolving a multi-GB CUDA build on machines that have the CPU wheel.
TORCH := torch==2.13.0

.PHONY: demo run test lint install install-test dry-run clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet $(TORCH)
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@

install: $(VENV)/.installed
install-test: $(VENV)/.installed-test

demo: install
	$(BIN)/snakemake --profile profiles/local --cores $(CORES)
	$(BIN)/snakemake --profile profiles/local --cores $(CORES) --report results/report.html
	@echo
	@cat results/tables/results.md
	@echo
	@echo "Pareto plots:"
	@ls -1 results/tables/plots/pareto/*.png
	@echo "Raw numbers: results/tables/metrics.csv"
	@echo "Report (tables and every plot, with captions): results/report.html"

test: install-test
	$(BIN)/python -m pytest

# The Snakemake workflow catalog's checks. `snakemake --lint` exits 1 on any finding; snakefmt
# checks the Snakefile and rules/*.smk ([tool.snakefmt] in pyproject.toml; `snakefmt .` fixes).
lint: install-test
	@for c in config.yaml configs/*.yaml; do \
		echo "snakemake --lint --configfile $$c"; \
		$(BIN)/snakemake --lint --configfile $$c || exit 1; \
	done
	$(BIN)/snakefmt --check .
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# Any config: `make run CONFIG=configs/hopper.yaml`. The config is validated first: Snakemake's own
# reading of a --configfile reports a YAML syntax error without its line and column.
CONFIG ?= config.yaml
run: install
	$(BIN)/morl validate-config $(CONFIG)
	$(BIN)/snakemake --profile profiles/local --cores $(CORES) --configfile $(CONFIG)

dry-run: install
	$(BIN)/snakemake -n --configfile configs/paper.yaml

clean:
	rm -rf results .snakemake
