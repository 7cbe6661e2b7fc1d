"""What real engine releases accept and print, as read off their wheels (scripts/conformance.py).

The facts live in conformance.json beside this module (committed, generated): per engine the
releases of the matrix, every flag with the releases that accept it, the choices of the flags
firedup renders, the log literals firedup's markers depend on, console scripts and entry
modules. This module loads them, answers "does release X accept flag F" (a release between
two checked ones is taken to behave like the older one), and renders docs/engines.md.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

DATA = Path(__file__).resolve().parent / "conformance.json"

MATRIX: Mapping[str, tuple[str, ...]] = {
    # Release boundaries where a flag or a log line firedup depends on changes (engines.md §11).
    "sglang": (
        "0.4.0.post2",
        "0.4.2",
        "0.4.4",
        "0.4.5",
        "0.4.10.post2",
        "0.5.2",
        "0.5.3",
        "0.5.4",
        "0.5.9",
        "0.5.10",
        "0.5.12",
        "0.5.14",
        "0.5.17",
        "0.5.18",
        "0.5.19",
        "0.5.20",
        "0.5.21",
        "0.5.22",
        "0.5.23",
    ),
    # Every minor release from 0.26 (the API server's flags moved in 0.29 and again in 0.33).
    "vllm": (
        "0.8.0",
        "0.10.2",
        "0.11.0",
        "0.12.0",
        "0.20.0",
        "0.26.0",
        "0.27.0",
        "0.28.0",
        "0.29.0",
        "0.30.0",
        "0.31.0",
        "0.32.0",
        "0.33.0",
    ),
}
# Flags whose choices are kept per release (the rest keep only "accepted or not").
TRACKED_CHOICES = ("--speculative-algorithm",)


@dataclass(frozen=True)
class Literal:
    engine: str
    needle: str  # a verbatim piece of a string constant in the engine's package
    phase: str  # the logscan phase (or "failure") firedup reads it as
    forms: tuple[str, ...] = ()  # printf forms that print the needle (vLLM: "%s" = "GPU")

    @property
    def searched(self) -> tuple[str, ...]:
        return (self.needle, *self.forms)


LITERALS: tuple[Literal, ...] = (
    Literal("sglang", "Init torch distributed begin", "init_distributed"),
    Literal("sglang", "Load weight begin", "loading_weights"),
    Literal("sglang", "KV Cache is allocated", "kv_cache"),
    Literal("sglang", "Memory pool end", "kv_cache"),
    Literal("sglang", "cuda graph begin", "cuda_graph"),
    Literal("sglang", "CUDA graph begin", "cuda_graph"),
    Literal("sglang", "Capturing batches", "cuda_graph"),
    Literal("sglang", "The server is fired up and ready to roll", "ready"),
    Literal("sglang", "Received sigquit from a child", "failure"),
    Literal("sglang", "Capture cuda graph failed", "failure"),
    Literal("sglang", "scheduler died during initialization", "failure"),
    Literal("vllm", "Starting to load model", "loading_weights"),
    Literal("vllm", "Model loading took", "loading_weights"),
    Literal("vllm", "Available KV cache memory", "kv_cache"),
    Literal("vllm", "GPU KV cache size", "kv_cache", forms=("%s KV cache size",)),
    Literal("vllm", "Graph capturing finished", "cuda_graph"),
    Literal("vllm", "Starting vLLM API server", "http_up"),
    Literal("vllm", "Starting vLLM server on", "http_up"),
    Literal("vllm", "Available routes are", "http_up"),
    Literal("vllm", "Engine core initialization failed", "failure"),
    Literal("vllm", "died unexpectedly", "failure"),
)
# Phases a startup must show on a supported release, so firedup can follow it. vLLM's ready
# line ("Application startup complete.") is uvicorn's, not in vLLM's wheel.
REQUIRED_PHASES: Mapping[str, tuple[str, ...]] = {
    "sglang": ("loading_weights", "kv_cache", "cuda_graph", "ready"),
    "vllm": ("loading_weights", "kv_cache", "http_up"),
}


def _v(text: str) -> Version:
    return Version(text)


def intervals(present: list[bool], releases: list[str]) -> str:
    """[True, True, False, True] over releases -> "r0..r1 r3" (compact, diff-friendly)."""
    spans: list[list[str]] = []
    for i, (has, release) in enumerate(zip(present, releases, strict=True)):
        if has and spans and i > 0 and spans[-1][1] == releases[i - 1]:
            spans[-1][1] = release
        elif has:
            spans.append([release, release])
    return " ".join(a if a == b else f"{a}..{b}" for a, b in spans)


def spans(text: str) -> list[tuple[str, str]]:
    """ "r0..r1 r3" -> [(r0, r1), (r3, r3)]."""
    out = []
    for part in text.split():
        first, _, last = part.partition("..")
        out.append((first, last or first))
    return out


def compact(raw: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> dict[str, Any]:
    """Per-release facts from the tool -> the committed, diff-friendly form."""
    data: dict[str, Any] = {}
    for engine, by_version in raw.items():
        releases = sorted(by_version, key=_v)
        every = sorted({f for facts in by_version.values() for f in facts["flags"]})
        flags = {
            f: intervals([f in by_version[r]["flags"] for r in releases], releases) for f in every
        }
        per_release = {
            r: {
                "choices": {
                    f: by_version[r]["flags"].get(f)
                    for f in TRACKED_CHOICES
                    if f in by_version[r]["flags"]
                },
                "files": by_version[r]["files"],
                "unread_parser_files": by_version[r].get("unread_parser_files", []),
                "literals": by_version[r]["literals"],
                "console_scripts": by_version[r]["console_scripts"],
                "modules": by_version[r]["modules"],
                "speculative_methods": by_version[r]["speculative_methods"],
            }
            for r in releases
        }
        data[engine] = {"releases": per_release, "flags": flags}
    return data


@dataclass(frozen=True)
class Release:
    """One engine release as firedup knows it: the checked release it is taken to be."""

    engine: str
    version: str  # as asked (the node's)
    checked: str  # the newest checked release <= version (or the oldest, for older ones)
    facts: Mapping[str, Any]
    flag_ranges: Mapping[str, str]

    @property
    def is_after_checked(self) -> bool:
        """The asked version is at or after the release whose facts stand in for it."""
        try:
            return _v(self.version) >= _v(self.checked)
        except InvalidVersion:
            return True

    def accepts(self, flag: str) -> bool:
        here = _v(self.checked)
        return any(_v(a) <= here <= _v(b) for a, b in spans(self.flag_ranges.get(flag, "")))

    def choices(self, flag: str) -> list[str] | None:
        return self.facts["choices"].get(flag)

    @property
    def flags(self) -> list[str]:
        return sorted(f for f in self.flag_ranges if self.accepts(f))

    @property
    def speculative_methods(self) -> list[str] | None:
        methods = self.facts.get("speculative_methods")
        return list(methods) if methods else None


@cache
def load() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DATA.read_text())
    return data


def releases(engine: str) -> list[str]:
    return sorted(load()[engine]["releases"], key=_v)


def newest(engine: str) -> str:
    return releases(engine)[-1]


def release(engine: str, version: str) -> Release:
    """The facts that hold for `version` (which need not be in the matrix)."""
    try:
        wanted = _v(version)
    except InvalidVersion:
        wanted = _v(newest(engine))
    known = releases(engine)
    older = [r for r in known if _v(r) <= wanted]
    checked = older[-1] if older else known[0]
    engine_data = load()[engine]
    return Release(engine, version, checked, engine_data["releases"][checked], engine_data["flags"])


def first_accepting(engine: str, flag: str) -> str | None:
    ranges = spans(load()[engine]["flags"].get(flag, ""))
    return ranges[0][0] if ranges else None


def first_with_choice(engine: str, flag: str, choice: str) -> str | None:
    """The first checked release whose `flag` offers `choice` (a free string counts)."""
    for version in releases(engine):
        rel = release(engine, version)
        if rel.accepts(flag) and (rel.choices(flag) is None or choice in (rel.choices(flag) or ())):
            return version
    return None


def phases_seen(rel: Release) -> set[str]:
    literals = rel.facts["literals"]
    return {lit.phase for lit in LITERALS if lit.engine == rel.engine and lit.needle in literals}
