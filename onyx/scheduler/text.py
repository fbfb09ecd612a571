"""Token ids → response text: exact token bytes, incremental UTF-8 and stop strings.

Text from a stop string on is dropped; while streaming, text that could still begin a stop
string is held back until it cannot. Under a constraint a stop string ends the text only where
the text before it is complete under the constraint (`complete`); elsewhere it is passed over
as part of the output, so a `stop` answer under a constraint always validates.
"""

from __future__ import annotations

import codecs


class TextBuilder:
    """`complete(text)`: whether the text may end here (None: anywhere)."""

    def __init__(self, vocab, stop: tuple[str, ...] | list[str], complete=None) -> None:
        self.vocab = vocab
        self.stop = list(stop)
        self.complete = complete
        self.passed = 0  # stop strings starting before this were passed over (text incomplete)
        self.hold = max((len(s) for s in self.stop), default=1) - 1
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.text = ""
        self.emitted = 0
        self.stopped = False
        self.stopped_by: str | None = None  # the stop string that ended the text

    def push(self, token: int) -> str:
        """Adds a token; returns the text that may be shown now."""
        self.text += self.decoder.decode(self.vocab.token_bytes(token))
        if self.stop:
            start = max(0, self.emitted - self.hold, self.passed)
            while hits := [(i, s) for s in self.stop if (i := self.text.find(s, start)) >= 0]:
                cut, by = min(hits, key=lambda h: h[0])
                if self.complete is None or self.complete(self.text[:cut]):
                    self.text, self.stopped, self.stopped_by = self.text[:cut], True, by
                    return ""
                start = self.passed = cut + 1
        end = max(self.emitted, len(self.text) - self.hold) if self.stop else len(self.text)
        delta = self.text[self.emitted:end]
        self.emitted = end
        return delta

    def flush(self) -> str:
        """The text held back, at the end of the generation."""
        if not self.stopped:
            self.text += self.decoder.decode(b"", final=True)
        delta = self.text[self.emitted:]
        self.emitted = len(self.text)
        return delta
