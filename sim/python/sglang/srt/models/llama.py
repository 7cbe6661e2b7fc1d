"""Stand-in LlamaForCausalLM (has the EAGLE-3 hooks, like the real llama.py)."""

from sglang.srt.models.deepseek_v2 import _LanguageModelBase


class LlamaForCausalLM(_LanguageModelBase):
    pass


EntryClass = [LlamaForCausalLM]
