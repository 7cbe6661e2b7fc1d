"""Stand-in EAGLE-3 draft model (LlamaForCausalLMEagle3)."""

from __future__ import annotations

from typing import Any

from sglang.srt.models.deepseek_v2 import _LanguageModelBase


class LlamaForCausalLMEagle3(_LanguageModelBase):
    def __init__(self, config: Any, quant_config: Any = None, prefix: str = "") -> None:
        super().__init__(config, quant_config, prefix)
        # Drafts with their own (smaller) vocabulary keep their lm_head and take only the
        # target's embedding; sglang checks this flag in EAGLEWorker.__init__.
        self.load_lm_head_from_target = getattr(config, "draft_vocab_size", None) is None

    def set_embed(self, embed: Any) -> None:
        self.model.embed_tokens.weight = embed


EntryClass = [LlamaForCausalLMEagle3]
