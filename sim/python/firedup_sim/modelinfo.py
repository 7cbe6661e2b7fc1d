"""What the simulator derives from a model directory: config, shards, size on each GPU."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CONTEXT_KEYS = (
    "max_sequence_length",
    "seq_length",
    "max_seq_len",
    "model_max_length",
    "max_position_embeddings",
)


@dataclass(frozen=True)
class ModelInfo:
    path: str
    config: dict[str, Any]
    text_config: dict[str, Any]
    architecture: str
    shard_count: int

    @property
    def has_vision(self) -> bool:
        return "vision_config" in self.config

    @property
    def model_type(self) -> str:
        return str(self.config.get("model_type", "llama"))

    @property
    def is_mla(self) -> bool:
        return "kv_lora_rank" in self.text_config

    def param_count(self) -> float:
        c = self.text_config
        hidden = c.get("hidden_size", 4096)
        layers = c.get("num_hidden_layers", 32)
        experts = c.get("n_routed_experts") or 1
        inter = c.get("moe_intermediate_size") if experts > 1 else c.get("intermediate_size")
        vocab = c.get("vocab_size", 32000)
        return layers * (4 * hidden * hidden + experts * 3 * hidden * (inter or 4 * hidden)) + (
            2 * vocab * hidden
        )

    def weight_gb(self, tp: int) -> float:
        quant = self.config.get("quantization_config") or self.text_config.get(
            "quantization_config"
        )
        four_bit = quant and (quant.get("bits") == 4 or '"num_bits": 4' in json.dumps(quant))
        bytes_per_param = 0.5 if four_bit else 2.0
        return self.param_count() * bytes_per_param / tp / 1024**3

    def kv_bytes_per_token(self, tp: int) -> float:
        c = self.text_config
        layers = c.get("num_hidden_layers", 32)
        if self.is_mla:  # MLA caches the compressed latent, replicated on every rank
            return layers * (c["kv_lora_rank"] + c.get("qk_rope_head_dim", 64)) * 2
        heads = max(1, c.get("num_key_value_heads", 8) // tp)
        head_dim = c.get("head_dim") or c.get("hidden_size", 4096) // c.get(
            "num_attention_heads", 32
        )
        return layers * heads * head_dim * 2 * 2


def derived_context_len(text_config: dict[str, Any]) -> int:
    """Like sglang get_context_length: first key found, times a rope scaling factor."""
    factor = 1.0
    rope = text_config.get("rope_scaling") or {}
    if rope and rope.get("rope_type", rope.get("type")) not in ("su", "llama3", "longrope"):
        factor = float(rope.get("factor", 1.0))
        if "original_max_position_embeddings" in rope:
            factor = 1.0
    for key in CONTEXT_KEYS:
        if key in text_config:
            return int(factor * text_config[key])
    return 2048


def load(path: str) -> ModelInfo:
    """Raises OSError like transformers when there is no config.json (message kept close)."""
    model_dir = Path(path)
    config_file = model_dir / "config.json"
    if not config_file.is_file():
        raise OSError(
            f"Can't load the configuration of '{path}'. If you were trying to load it from "
            "'https://huggingface.co/models', make sure you don't have a local directory with "
            f"the same name. Otherwise, make sure '{path}' is the correct path to a directory "
            "containing a config.json file"
        )
    config = json.loads(config_file.read_text())
    text_config = config.get("text_config") or config
    arch = (config.get("architectures") or ["LlamaForCausalLM"])[0]
    shards = len(list(model_dir.glob("*.safetensors")))
    return ModelInfo(str(model_dir), config, text_config, arch, shards)
