"""Onyx's benchmarks (`*_bench.py`, each a script) and the modules they share: `harness` (setup,
timing, metadata, results), `corpus` (patterns, schemas, prompts), `peers` (the peer libraries'
adapters), `repair_corpus` (the broken-JSON corpora in `data/`, and their generator), and `dyck` / `phi_laws` (toy language and laws for Φ).

Tests import the shared modules as `bench.<module>`; nothing here imports from `tests/`.
"""
