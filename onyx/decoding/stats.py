"""What a generation reports: token counts, times, forwards, and drafting per source."""

from __future__ import annotations

from dataclasses import dataclass, field

DRAFT_SOURCES = ("model", "lookup", "forced")


@dataclass
class DraftCounts:
    """Drafted and accepted tokens per draft source."""

    drafted: dict[str, int] = field(default_factory=lambda: dict.fromkeys(DRAFT_SOURCES, 0))
    accepted: dict[str, int] = field(default_factory=lambda: dict.fromkeys(DRAFT_SOURCES, 0))

    def add(self, sources: list[str], n_accepted: int) -> None:
        """Counts one round: the drafts' sources, in order, of which the first `n_accepted` were
        taken."""
        for i, src in enumerate(sources):
            self.drafted[src] += 1
            self.accepted[src] += i < n_accepted

    def as_dict(self, mode: str) -> dict:
        drafted, accepted = sum(self.drafted.values()), sum(self.accepted.values())
        out = {"speculative": mode, "drafted": drafted, "accepted": accepted,
               "acceptance_rate": round(accepted / drafted, 4) if drafted else 0.0}
        for src in DRAFT_SOURCES:
            d, a = self.drafted[src], self.accepted[src]
            if d:
                out[f"drafted_{src}"] = d
                out[f"accepted_{src}"] = a
                out[f"acceptance_rate_{src}"] = round(a / d, 4)
        return out


@dataclass
class DecodeStats:
    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0
    completion_tokens: int = 0
    prefill_s: float = 0.0
    decode_s: float = 0.0
    target_forwards: int = 0
    extra: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        tok_s = self.completion_tokens / self.decode_s if self.decode_s > 0 else 0.0
        return {
            "prompt_tokens": self.prompt_tokens,
            "cached_prompt_tokens": self.cached_prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "prefill_s": round(self.prefill_s, 6),
            "ttft_s": round(self.prefill_s, 6),
            "decode_s": round(self.decode_s, 6),
            "tokens_per_s": round(tok_s, 3),
            "target_forwards": self.target_forwards,
            **self.extra,
        }
