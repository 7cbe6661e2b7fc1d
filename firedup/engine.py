"""The engines firedup deploys: a leaf every layer may import (the log reader included), so
naming an engine never pulls in the inventory's pydantic/PyYAML models."""

from __future__ import annotations

from enum import StrEnum


class Engine(StrEnum):
    SGLANG = "sglang"
    VLLM = "vllm"
