"""max_model_len as vLLM 0.32 derives and verifies it (vllm/config/model.py
_get_and_verify_max_len, transformers_utils/model_arch_config_convertor.py
derive_max_model_len_and_key), and the refusal as the real server prints it: ModelConfig is a
pydantic dataclass, so the ValueError reaches the log as a pydantic_core ValidationError."""

from __future__ import annotations

import json
import os
from typing import Any

POSSIBLE_KEYS = (
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
UNSCALED_ROPE = ("su", "longrope", "llama3", "yarn", "deepseek_yarn", "deepseek_llama_scaling")
WARNING = (
    "VLLM_ALLOW_LONG_MAX_MODEL_LEN must be used with extreme caution. If the model uses "
    "relative position encoding (RoPE), positions exceeding derived_max_model_len lead to nan. "
    "If the model uses absolute position encoding, positions exceeding derived_max_model_len "
    "will cause a CUDA array out-of-bounds error."
)


class ValidationError(ValueError):
    """Prints as pydantic's: `pydantic_core._pydantic_core.ValidationError: 1 validation ...`."""

    __module__ = "pydantic_core._pydantic_core"

    def __init__(self, title: str, message: str, args: dict[str, Any]) -> None:
        full = f"ArgsKwargs((), {args!r})"  # pydantic shortens the input's repr to 50
        shown = full if len(full) <= 50 else full[:25] + "..." + full[-24:]
        text = (
            f"1 validation error for {title}\n  Value error, {message} [type=value_error, "
            f"input_value={shown}, input_type=ArgsKwargs]\n"
            "    For further information visit https://errors.pydantic.dev/2.14/v/value_error"
        )
        super().__init__(text)


def _rope_factor(text: dict[str, Any], model_type: str) -> float | None:
    """None: no RoPE parameters (the length stays an int); else the factor applied."""
    rope = text.get("rope_parameters") or text.get("rope_scaling")
    if not isinstance(rope, dict) and "rope_theta" not in text:
        return None
    if not isinstance(rope, dict) or "gemma3" in model_type:
        return 1.0
    layers = [p for p in rope.values() if isinstance(p, dict)] or [rope]
    factor = 1.0
    for params in layers:
        if params.get("rope_type", params.get("type", "default")) not in UNSCALED_ROPE:
            factor = params.get("factor", factor) or 1.0
    return float(factor)


def derived_max_model_len(config: dict[str, Any], model_dir: str) -> tuple[float, str | None]:
    text = config.get("text_config") or config
    derived: float = float("inf")
    key = None
    for name in POSSIBLE_KEYS:
        value = text.get(name)
        if value is not None and value < derived:
            derived, key = value, name
    if text.get("model_max_length"):
        derived, key = text["model_max_length"], "model_max_length"
    try:
        with open(os.path.join(model_dir, "tokenizer_config.json"), encoding="utf-8") as fh:
            derived = min(derived, json.load(fh).get("model_max_length", derived))
    except (OSError, ValueError):
        pass
    if derived == float("inf"):
        derived = 2048
    factor = _rope_factor(text, str(config.get("model_type") or ""))
    if factor is not None:
        derived *= factor
    return derived, key


def verify_max_model_len(
    config: dict[str, Any], model_dir: str, max_model_len: int | None, args: dict[str, Any]
) -> int:
    derived, key = derived_max_model_len(config, model_dir)
    if max_model_len is None:
        return int(derived)
    if max_model_len > derived:
        model_max_length = config.get("model_max_length")
        if model_max_length is None or max_model_len > model_max_length:
            msg = (
                f"User-specified max_model_len ({max_model_len}) is greater than the derived "
                f"max_model_len ({key}={derived} or model_max_length={model_max_length} in "
                "model's config.json)."
            )
            allow = os.environ.get("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "0").lower()
            if allow not in ("1", "true"):
                raise ValidationError(
                    "ModelConfig",
                    f"{msg} To allow overriding this maximum, set the env var "
                    f"VLLM_ALLOW_LONG_MAX_MODEL_LEN=1. {WARNING}",
                    args,
                )
    return int(max_model_len)
