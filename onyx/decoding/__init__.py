"""The decoding loop, one job per file.

- `loop.py`: the round loop (`decode`): draft, one target forward, verify, emit, roll back.
- `drafts.py`: where drafts come from (grammar-forced spans, a draft model, prompt lookup).
- `gamma.py`: how many drafts per round (fixed or adaptive γ).
- `verify.py`: exact verification (argmax match, or accept/reject with residual resampling).
- `runner.py`: `ModelRunner`, the only code that calls a model (prefill, forwards, KV pool).
- `sampling.py`: masked logits → probabilities → a token.
- `stats.py`: what a generation reports.
- `phi.py`: Φ reweighting of the verifier's target (`phi="onestep" | "exact"`).
"""

from onyx.decoding.loop import Finish, decode
from onyx.decoding.runner import ModelRunner
from onyx.decoding.stats import DecodeStats

__all__ = ["DecodeStats", "Finish", "ModelRunner", "decode"]
