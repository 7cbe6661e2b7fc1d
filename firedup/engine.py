"""The engines firedup deploys: a leaf every layer may import (the log reader included), so
naming an engine never pulls in the inventory's pydantic/PyYAML models."""

from __future__ import annotations

from enum import Enum


class Engine(str, Enum):  # noqa: UP042 - not StrEnum: the log reader runs on Python 3.8+
    SGLANG = "sglang"
    VLLM = "vllm"

    def __str__(self) -> str:
        return self.value
