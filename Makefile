# Onyx: every step from a fresh clone. `make test` and `make serve` are the README's commands.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
export VIRTUAL_ENV := $(abspath $(VENV))

.PHONY: test build venv fetch-test-data cargo-test pytest bench clean

test: build fetch-test-data cargo-test pytest

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip "maturin>=1.7,<2"

venv: $(BIN)/python

# Builds the Rust extension in release mode into the venv (editable: onyx/ is used in place).
build: venv
	$(BIN)/maturin develop --release --extras test --quiet

# Real tokenizers for the tests (SmolLM2, Qwen2, Gemma 3), cached in ~/.cache/onyx.
fetch-test-data: venv
	$(BIN)/python -m onyx.assets fetch smollm2 qwen2-tokenizer gemma3-tokenizer

cargo-test:
	cargo test --release --quiet

pytest:
	$(BIN)/python -m pytest -q tests

# Benchmarks, with the peer libraries installed as optional dependencies.
bench: build fetch-test-data
	$(BIN)/maturin develop --release --extras test,bench --quiet
	$(BIN)/python -m pip install --quiet --no-deps "xgrammar==0.2.8"
	$(BIN)/python bench/grammar_bench.py

clean:
	rm -rf $(VENV) target
