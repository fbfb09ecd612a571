"""Onyx's grammar inside other generation stacks, as their own logits processors.

- `onyx.integrations.mlx_lm`: `GrammarLogitsProcessor` for mlx-lm's `logits_processors=`
  (`generate`, `stream_generate`, and one per sequence in `BatchGenerator`).
- `onyx.integrations.transformers`: `GrammarLogitsProcessor` for `model.generate` in Hugging
  Face transformers (torch tensors, one grammar state per row).

Both build the grammar core's vocabulary from the model's own tokenizer object (once per
tokenizer, with the tokenizer self-test) and compile each pattern once (`common.py`). Nothing
is imported here: importing one integration never imports the other's framework.
"""
