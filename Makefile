PY ?= .venv/bin/python

.PHONY: install check test bench fmt

install:
	python3 -m venv .venv
	$(PY) -m pip install -q -U pip
	$(PY) -m pip install -q -e ".[all,dev]"

check:
	$(PY) -m ruff check referee tests benchmarks
	$(PY) -m ruff format --check referee tests benchmarks
	$(PY) -m mypy referee

fmt:
	$(PY) -m ruff check --fix referee tests benchmarks
	$(PY) -m ruff format referee tests benchmarks

test:
	$(PY) -m pytest -q

bench:
	$(PY) benchmarks/bench_deterministic.py
