"""Deterministic completions: the same prompt always gets the same words."""

from __future__ import annotations

import hashlib

_TEXT = (
    "Paris the capital of France is known for its art culture and history and the river Seine "
    "flows through the city while people walk along the banks"
)
WORDS = _TEXT.split()


def completion_text(prompt: str, max_new_tokens: int) -> str:
    seed = int.from_bytes(hashlib.sha256(prompt.encode()).digest()[:4], "big")
    return " " + " ".join(WORDS[(seed + i) % len(WORDS)] for i in range(max_new_tokens))
