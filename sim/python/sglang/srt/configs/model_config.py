"""ModelConfig: reads config.json and derives the context length (0.5.9 model_config.py)."""

from __future__ import annotations

import logging

from firedup_sim import modelinfo
from sglang.srt._sim_stubs import PretrainedConfig
from sglang.srt.environ import envs

logger = logging.getLogger(__name__)


class ModelConfig:
    def __init__(
        self, model_path: str, context_length: int | None = None, is_draft_model: bool = False
    ) -> None:
        self.model_path = model_path
        self.is_draft_model = is_draft_model
        self.info = modelinfo.load(model_path)
        self.hf_config = PretrainedConfig(self.info.config)
        self.hf_text_config = PretrainedConfig(self.info.text_config)
        self._derive_context_length(context_length)

    @property
    def architecture(self) -> str:
        return self.info.architecture

    def _derive_context_length(self, context_length: int | None) -> None:
        is_draft_model = self.is_draft_model
        derived_context_len = modelinfo.derived_context_len(self.info.text_config)

        if context_length is not None:
            if context_length > derived_context_len:
                reason = "Target model's" if is_draft_model else "User-specified"
                msg = (
                    f"Warning: {reason} context_length ({context_length}) is greater than the derived context_length ({derived_context_len}). "  # noqa: E501
                    f"This may lead to incorrect model outputs or CUDA errors. Note that the derived context_length may differ from max_position_embeddings in the model's config."  # noqa: E501
                )
                if envs.SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN.get():
                    logger.warning(msg)
                    self.context_len = context_length
                    if is_draft_model:
                        self.hf_text_config.max_position_embeddings = context_length
                        logger.warning(
                            f"Overriding the draft model's max_position_embeddings to {context_length}."  # noqa: E501
                        )
                else:
                    raise ValueError(
                        f"{msg} To allow overriding this maximum, set the env var SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1"  # noqa: E501
                    )
            else:
                self.context_len = context_length
        else:
            self.context_len = derived_context_len
