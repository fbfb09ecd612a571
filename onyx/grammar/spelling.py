"""How a tokenizer family spells a token's bytes, and how to show bytes in a message.

The grammar core derives each token's bytes from its string by the family's rules: byte-level
BPE (GPT-2's byte alphabet: every byte is one printable code point) and SentencePiece (`▁` for a
space, `<0xNN>` tokens for raw bytes). The tokenizer self-test (`onyx.grammar.self_test`) applies
the same rules to the tokenizer's own strings and compares.
"""

from __future__ import annotations


def byte_level_alphabet() -> dict[int, int]:
    """GPT-2's byte alphabet: code point → byte."""
    printable = [b for b in range(256) if 0x21 <= b <= 0x7E or 0xA1 <= b <= 0xAC or 0xAE <= b <= 0xFF]
    out = {b: b for b in printable}
    n = 0
    for b in range(256):
        if b not in out:
            out[0x100 + n] = b
            n += 1
    return out


BYTE_LEVEL = byte_level_alphabet()
# str.translate table: alphabet code points → their byte (as a Latin-1 char); code points below
# U+0100 that are not in the alphabet → U+0100, so that `.encode("latin-1")` fails exactly when
# the string holds a code point outside the alphabet.
_BYTE_LEVEL_TRANSLATE = {**{cp: 0x100 for cp in range(256)}, **BYTE_LEVEL}


def byte_level_bytes(s: str) -> bytes:
    try:
        return s.translate(_BYTE_LEVEL_TRANSLATE).encode("latin-1")
    except UnicodeEncodeError:
        # Outside the alphabet: a control string left in the model vocab; its text is its bytes
        # (the grammar core's rule).
        return s.encode("utf-8")


_HEX = set("0123456789abcdefABCDEF")


def sentencepiece_bytes(s: str) -> bytes:
    if len(s) == 6 and s.startswith("<0x") and s.endswith(">") and s[3] in _HEX and s[4] in _HEX:
        return bytes([int(s[3:5], 16)])
    return s.replace("\u2581", " ").encode("utf-8")


def utf8_padding(b: bytes) -> tuple[bytes, bytes] | None:
    """Bytes to put before and after `b` to make it valid UTF-8, or None if none can."""
    k = 0
    while k < len(b) and 0x80 <= b[k] <= 0xBF:
        k += 1
    if k > 3:
        return None
    prefix = (b"", b"\xc2", b"\xe1", b"\xf1")[k]
    suffix = b""
    # The last lead byte in the final (up to) 4 bytes, if its sequence is cut short.
    for j in range(len(b) - 1, max(k, len(b) - 4) - 1, -1):
        c = b[j]
        if 0x80 <= c <= 0xBF:
            continue
        need = 2 if 0xC2 <= c <= 0xDF else 3 if 0xE0 <= c <= 0xEF else 4 if 0xF0 <= c <= 0xF4 else 0
        have = len(b) - j
        if need > have:
            missing = need - have
            second = {0xE0: 0xA0, 0xF0: 0x90}.get(c, 0x80) if have == 1 else 0x80
            suffix = bytes([second] + [0x80] * (missing - 1))
        break
    try:
        (prefix + b + suffix).decode("utf-8")
    except UnicodeDecodeError:
        return None
    return prefix, suffix


def show_bytes(b: bytes) -> str:
    text = b.decode("utf-8", "replace")
    return f"{b!r} ({text!r})"
