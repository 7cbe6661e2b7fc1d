"""Typed environment flags (srt/environ.py registers SGLANG_* variables as EnvBool etc.)."""

from __future__ import annotations

import os

_TRUE = ("true", "1", "yes", "y")
_FALSE = ("false", "0", "no", "n")


class EnvBool:
    def __init__(self, name: str, default: bool) -> None:
        self.name = name
        self.default = default

    def get(self) -> bool:
        raw = os.environ.get(self.name)
        if raw is None or raw == "":
            return self.default
        value = raw.strip().lower()
        if value in _TRUE:
            return True
        if value in _FALSE:
            return False
        raise ValueError(
            f'Invalid value for environment variable {self.name}: "{raw}". '
            f"Expected one of {_TRUE + _FALSE} (case-insensitive)."
        )


class Envs:
    SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN = EnvBool(
        "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN", False
    )
    SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION = EnvBool(
        "SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION", True
    )


envs = Envs()
