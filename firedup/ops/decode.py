"""Serving stats from a running server's recent log lines (pure): is EAGLE-3 paying off?

SGLang logs one line per decode batch, e.g.
  `Decode batch, #running-req: 1, #token: 90, token usage: 0.00, accept len: 3.21, ...,
   gen throughput (token/s): 133.22, #queue-req: 0`
(accept len only with speculative decoding); vLLM logs periodic
  `Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 42.1 tokens/s, ...`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from statistics import fmean
from typing import Any

_SGLANG_THROUGHPUT = re.compile(r"gen throughput \(token/s\): ([0-9.]+)")
_SGLANG_ACCEPT = re.compile(r"accept len: ([0-9.]+)")
_VLLM_THROUGHPUT = re.compile(r"Avg generation throughput: ([0-9.]+) tokens/s")
RECENT = 20  # decode lines averaged: recent enough to mean "now", many enough to be steady
MARKERS = ("Decode batch", "Avg generation throughput")  # a decode line has one of these


@dataclass(frozen=True)
class DecodeStats:
    lines: int
    throughput_tok_s: float | None
    accept_len: float | None

    def to_json(self) -> dict[str, Any]:
        return {
            "lines": self.lines,
            "throughput_tok_s": self.throughput_tok_s,
            "accept_len": self.accept_len,
        }

    def text(self) -> str:
        parts = []
        if self.throughput_tok_s is not None:
            parts.append(f"{self.throughput_tok_s:.1f} tok/s")
        if self.accept_len is not None:
            parts.append(f"accept len {self.accept_len:.2f}")
        return ", ".join(parts) or "-"


def _floats(pattern: re.Pattern[str], lines: list[str]) -> list[float]:
    values = []
    for line in lines:
        match = pattern.search(line)
        if match:
            try:
                values.append(float(match.group(1)))
            except ValueError:
                continue
    return values[-RECENT:]


def decode_stats(log_tail: str) -> DecodeStats | None:
    """Averages over the most recent decode lines; None when the tail has none."""
    lines = log_tail.replace("\r", "\n").splitlines()
    decode = [ln for ln in lines if any(m in ln for m in MARKERS)]
    if not decode:
        return None
    throughput = _floats(_SGLANG_THROUGHPUT, decode) or _floats(_VLLM_THROUGHPUT, decode)
    accept = _floats(_SGLANG_ACCEPT, decode)
    return DecodeStats(
        lines=len(decode),
        throughput_tok_s=round(fmean(throughput), 2) if throughput else None,
        accept_len=round(fmean(accept), 2) if accept else None,
    )
