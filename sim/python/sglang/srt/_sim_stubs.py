"""Stand-ins for the sglang internals that model files import (multimodal and loader helpers)."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import Any

from sglang.srt._sim_torch import Module, Tensor


class PretrainedConfig:
    """Attribute access over a config.json dict, nested dicts become configs too."""

    def __init__(self, data: dict[str, Any]) -> None:
        for key, value in data.items():
            setattr(self, key, PretrainedConfig(value) if isinstance(value, dict) else value)


KimiK25Config = PretrainedConfig
KimiK25VisionConfig = PretrainedConfig


class QuantizationConfig:
    pass


class Modality(enum.Enum):
    IMAGE = "image"
    VIDEO = "video"
    AUDIO = "audio"


class MultimodalDataItem:
    feature: Tensor
    grid_thws: Tensor


class MultimodalInputs:
    pass


class ForwardBatch:
    pass


class WeightsMapper:
    def __init__(self, orig_to_new_prefix: dict[str, str] | None = None) -> None:
        self.orig_to_new_prefix = orig_to_new_prefix or {}

    def apply(self, weights: Iterable[tuple[str, Tensor]]) -> Iterable[tuple[str, Tensor]]:
        for name, weight in weights:
            for old, new in self.orig_to_new_prefix.items():
                if name.startswith(old):
                    name = new + name[len(old) :]
            yield name, weight


class MultiModalityDataPaddingPatternMultimodalTokens:
    def pad_input_tokens(self, input_ids: list[int], mm_inputs: MultimodalInputs) -> list[int]:
        return input_ids


def general_mm_embed_routine(**kwargs: Any) -> Tensor:
    return kwargs["language_model"](kwargs["input_ids"], kwargs["positions"], None)


def default_weight_loader(param: Any, loaded_weight: Tensor) -> None:
    pass


def run_dp_sharded_mrope_vision_model(*args: Any, **kwargs: Any) -> Tensor:
    return Tensor("vision")


def vision_tower_forward_auto(*args: Any, **kwargs: Any) -> list[Tensor]:
    return [Tensor("vision")]


class MoonViT3dPretrainedModel(Module):
    def __init__(self, config: Any, *inputs: Any, use_data_parallel: bool = False, **kw: Any):
        super().__init__()
        self.config = config
        self.use_data_parallel = use_data_parallel


class K2VLMultiModalProjector(Module):
    def __init__(self, config: Any) -> None:
        super().__init__()
        self.config = config
