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


# vLLM 0.32 (transformers_utils/model_arch_config_convertor.py derive_max_model_len_and_key,
# config/model.py _get_and_verify_max_len): the smallest of these keys, `model_max_length`
# winning when set; then min with the tokenizer's model_max_length; then times the RoPE
# factor unless the type keeps max_position_embeddings already scaled.
VLLM_LENGTH_KEYS = (
    "max_position_embeddings",
    "n_positions",
    "max_seq_len",
    "seq_length",
    "model_max_length",
    "max_target_positions",
    "max_sequence_length",
    "max_seq_length",
    "seq_len",
)
VLLM_UNSCALED_ROPE = ("su", "longrope", "llama3", "yarn", "deepseek_yarn", "deepseek_llama_scaling")
VLLM_DEFAULT_CONTEXT = 2048


def _number(value: object) -> float | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    return float(value) if ok else None  # type: ignore[arg-type]


def _vllm_rope_factor(text: Mapping[str, Any], model_type: str) -> float:
    rope = text.get("rope_parameters") or text.get("rope_scaling")
    if not isinstance(rope, Mapping) or not rope or "gemma3" in model_type:
        return 1.0
    layers = [p for p in rope.values() if isinstance(p, Mapping)] or [rope]  # nested per layer
    factor = 1.0
    for params in layers:
        kind = params.get("rope_type", params.get("type", "default"))
        if kind not in VLLM_UNSCALED_ROPE:
            factor = _number(params.get("factor")) or factor
    return factor


def vllm_context_length(
    config: Mapping[str, Any], tokenizer_max_length: float | None = None
) -> tuple[int, str]:
    """The max_model_len vLLM derives, and what it came from (for messages)."""
    text = text_config(config)
    derived, key = float("inf"), ""
    for name in VLLM_LENGTH_KEYS:
        value = _number(text.get(name))
        if value is not None and value < derived:
            derived, key = value, name
    if _number(text.get("model_max_length")):
        derived, key = float(text["model_max_length"]), "model_max_length"
    if tokenizer_max_length is not None and tokenizer_max_length < derived:
        derived, key = tokenizer_max_length, "the tokenizer's model_max_length"
    if derived == float("inf"):
        derived, key = VLLM_DEFAULT_CONTEXT, "no length key (vLLM's default)"
    factor = _vllm_rope_factor(text, str(config.get("model_type") or ""))
    if factor != 1:
        key = f"{key} x rope factor {factor:g}"
    return int(derived * factor), key


def vllm_refuses(config: Mapping[str, Any], requested: int, derived: int) -> bool:
    """vLLM refuses a longer max_model_len, unless the config's own model_max_length covers it."""
    if requested <= derived:
        return False
    allowed = _number(config.get("model_max_length"))
    return allowed is None or requested > allowed
