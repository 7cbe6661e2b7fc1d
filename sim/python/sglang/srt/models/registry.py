"""Architecture name -> model class, importing the model module normally (so .pyc is real)."""

from __future__ import annotations

import importlib

from sglang.version import __version_tuple__

_MODULES = {
    "KimiK25ForConditionalGeneration": "sglang.srt.models.kimi_k25",
    "DeepseekV3ForCausalLM": "sglang.srt.models.deepseek_v2",
    "DeepseekV2ForCausalLM": "sglang.srt.models.deepseek_v2",
    "LlamaForCausalLM": "sglang.srt.models.llama",
    "LlamaForCausalLMEagle3": "sglang.srt.models.llama_eagle3",
}


def resolve(architecture: str) -> type:
    module_name = _MODULES.get(architecture)
    if module_name is None:
        raise ValueError(
            f"Model architectures ['{architecture}'] are not supported for now. "
            f"Supported architectures: {sorted(_MODULES)}"
        )
    if architecture == "KimiK25ForConditionalGeneration" and __version_tuple__ >= (0, 5, 10):
        module_name = "sglang.srt.models._kimi_k25_v0510"
    module = importlib.import_module(module_name)
    return getattr(module, architecture)
