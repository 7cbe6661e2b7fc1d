"""KimiK25ForConditionalGeneration as sglang 0.5.10 ships it (PR #19689 added the hooks).

Used instead of kimi_k25.py when FIREDUP_SIM_SGLANG_VERSION selects 0.5.10 or later.
"""

from __future__ import annotations

from typing import Any

from sglang.srt.models import kimi_k25


class KimiK25ForConditionalGeneration(kimi_k25.KimiK25ForConditionalGeneration):
    def set_eagle3_layers_to_capture(self, layer_ids: list[int] | None = None) -> None:
        if not hasattr(self.language_model, "set_eagle3_layers_to_capture"):
            raise AttributeError("language_model does not support set_eagle3_layers_to_capture")
        self.language_model.set_eagle3_layers_to_capture(layer_ids)

    def get_embed_and_head(self) -> Any:
        if not hasattr(self.language_model, "get_embed_and_head"):
            raise AttributeError("language_model does not support get_embed_and_head")
        return self.language_model.get_embed_and_head()

    def set_embed_and_head(self, embed: Any, head: Any) -> None:
        if not hasattr(self.language_model, "set_embed_and_head"):
            raise AttributeError("language_model does not support set_embed_and_head")
        self.language_model.set_embed_and_head(embed, head)


EntryClass = [KimiK25ForConditionalGeneration]
