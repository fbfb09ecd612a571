"""The grammar core's Python side (the core itself is the Rust extension `onyx._grammar`).

- `vocabulary.py`: `Vocabulary`, a tokenizer's tokens as bytes, and what it compiles;
- `constraint.py`: the one constraint stack: compiled grammars cached by pattern, their masks
  in each framework's form, and `Constraint`, one sequence's walk through a grammar;
- `self_test.py`: the tokenizer self-test (does the vocabulary spell what the tokenizer does?);
- `structure.py`: structures (segments, triggers, special tokens) for tools and reasoning;
- `repair.py`: a finished text repaired into the language.
"""
