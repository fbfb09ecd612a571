"""The decoding loop, one job per file.

- `batch.py`: `Batch`, the generations decoding together and the step that advances them all
  with one forward; `generation.py`: `Generation`, one sequence as the step sees it.
- `loop.py`: `decode`, one sequence alone (a batch of one).
- `drafts.py`: where drafts come from (grammar-forced spans, a draft model, prompt lookup) and
  the `Drafter` that asks for them.
- `gamma.py`: how many drafts per round (fixed or adaptive γ, priced with the device's step
  costs in `step_cost.json`).
- `verify.py`: exact verification (argmax match, or accept/reject with residual resampling).
- `processors.py`: the ordered logits processors of a sequence's rows (bias and penalties, the
  grammar mask, Φ) and the reasoning budget's mask restriction.
- `sampling.py`: processed logits → probabilities → a token; `logprobs.py`: what is reported.
- `phi.py`: Φ reweighting of the verifier's target (`phi="onestep" | "exact"`).
- `runner.py`: `ModelRunner`, the only code that calls a model (prefill, forwards, KV pool).
- `stats.py`: what a generation reports.
"""
import onyx.cpu  # noqa: F401,I001 - OpenBLAS preloaded before MLX (Linux)

from onyx.decoding.loop import Finish, decode
from onyx.decoding.runner import ModelRunner
from onyx.decoding.stats import DecodeStats

__all__ = ["DecodeStats", "Finish", "ModelRunner", "decode"]
