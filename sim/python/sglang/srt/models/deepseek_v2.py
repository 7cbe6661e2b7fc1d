"""Stand-in DeepseekV2/V3ForCausalLM: has the three EAGLE-3 hooks (deepseek_v2.py:2944-2963)."""

from __future__ import annotations

import types
from typing import Any

from sglang.srt._sim_torch import Module, Tensor


class _LanguageModelBase(Module):
    """What the real causal-LM classes share: embeddings, an lm_head and the EAGLE-3 hooks."""

    def __init__(self, config: Any, quant_config: Any = None, prefix: str = "") -> None:
        super().__init__()
        self.config = config
        self.quant_config = quant_config
        self.model = types.SimpleNamespace(embed_tokens=types.SimpleNamespace(weight=Tensor()))
        self.lm_head = types.SimpleNamespace(weight=Tensor("lm_head"))
        self.capture_aux_hidden_states = False
        self.loaded = 0

    def forward(self, input_ids: Any, positions: Any, forward_batch: Any) -> Tensor:
        return Tensor("hidden_states")

    def load_weights(self, weights: Any, is_nextn: bool = False) -> None:
        self.loaded += sum(1 for _ in weights)

    def get_embed_and_head(self) -> tuple[Tensor, Tensor]:
        return self.model.embed_tokens.weight, self.lm_head.weight

    def set_embed_and_head(self, embed: Tensor, head: Tensor) -> None:
        self.model.embed_tokens.weight = embed
        self.lm_head.weight = head

    def set_eagle3_layers_to_capture(self, layer_ids: list[int] | None = None) -> None:
        self.capture_aux_hidden_states = True
        num_layers = getattr(self.config, "num_hidden_layers", 32)
        self.layers_to_capture = (
            [2, num_layers // 2, num_layers - 3]
            if layer_ids is None
            else [val + 1 for val in layer_ids]
        )


class DeepseekV2ForCausalLM(_LanguageModelBase):
    pass


class DeepseekV3ForCausalLM(DeepseekV2ForCausalLM):
    pass


EntryClass = [DeepseekV2ForCausalLM, DeepseekV3ForCausalLM]
