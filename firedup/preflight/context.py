"""Context lengths as the engines derive them from a model's config.json (pure).

Mirrors sglang 0.5.9: `get_hf_text_config` picks the language model's sub-config of a
multimodal model, and `get_context_length` takes the first of CONTEXT_LENGTH_KEYS found,
times the rope-scaling factor (none when the scaling names `original_max_position_embeddings`
or is llama3-style), 2048 when no key is present (srt/utils/hf_transformers_utils.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

CONTEXT_LENGTH_KEYS = (
    "max_sequence_length",
    "seq_length",
    "max_seq_len",
    "model_max_length",
    "max_position_embeddings",
)
SUB_CONFIG_KEYS = ("text_config", "llm_config", "language_config")
DEFAULT_CONTEXT = 2048


def text_config(config: Mapping[str, Any]) -> Mapping[str, Any]:
    """The language model's part of a (possibly multimodal) config."""
    for key in SUB_CONFIG_KEYS:
        sub = config.get(key)
        if isinstance(sub, Mapping):
            return sub
    return config


def rope_factor(config: Mapping[str, Any]) -> float:
    scaling = config.get("rope_scaling")
    if not isinstance(scaling, Mapping) or not scaling:
        return 1.0
    if "original_max_position_embeddings" in scaling or scaling.get("rope_type") == "llama3":
        return 1.0
    factor = scaling.get("factor", 1)
    return float(factor) if isinstance(factor, int | float) else 1.0


def derived_context_length(config: Mapping[str, Any]) -> tuple[int, str]:
    """The context length the engine derives, and the key it came from (for messages)."""
    text = text_config(config)
    factor = rope_factor(text)
    for key in CONTEXT_LENGTH_KEYS:
        value = text.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            source = key if factor == 1 else f"{key} x rope factor {factor:g}"
            return int(factor * value), source
    return DEFAULT_CONTEXT, "no context key (SGLang's default)"


def architectures(config: Mapping[str, Any]) -> tuple[str, ...]:
    archs = config.get("architectures") or ()
    return tuple(a for a in archs if isinstance(a, str))
