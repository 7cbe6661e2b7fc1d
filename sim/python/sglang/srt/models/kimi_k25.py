# Stand-in for sglang 0.5.9 python/sglang/srt/models/kimi_k25.py on the simulated node.
#
# The vision tower and multimodal helpers are reduced to stand-ins (no torch here), but the
# class KimiK25ForConditionalGeneration below is copied verbatim from the 0.5.9 wheel, from its
# `class` line to the end of the file, so a unified diff written against the real file (adding
# get_embed_and_head / set_embed_and_head / set_eagle3_layers_to_capture) applies here too.
# Like 0.5.9, the wrapper does NOT forward those three EAGLE-3 hooks to self.language_model.
import logging
from typing import Iterable, List, Optional, Tuple

from sglang.srt._sim_stubs import (
    K2VLMultiModalProjector,
    KimiK25Config,
    Modality,
    MoonViT3dPretrainedModel,
    MultimodalDataItem,
    MultimodalInputs,
    MultiModalityDataPaddingPatternMultimodalTokens,
    QuantizationConfig,
    WeightsMapper,
    default_weight_loader,
    general_mm_embed_routine,
    run_dp_sharded_mrope_vision_model,
    vision_tower_forward_auto,
)
from sglang.srt._sim_stubs import ForwardBatch
from sglang.srt._sim_torch import nn, torch
from sglang.srt.models.deepseek_v2 import DeepseekV3ForCausalLM
from sglang.srt.server_args import get_global_server_args

KIMIV_VT_INFER_MAX_PATCH_NUM = 16328
logger = logging.getLogger(__name__)


def mm_projection_auto(mm_projector, group_output):
    return [mm_projector(group_output)]


class KimiK25ForConditionalGeneration(nn.Module):
    # Support nvidia/Kimi-K2.5-NVFP4 naming: language_model.layers.*.
    # Ref: HF config.json for nvidia/Kimi-K2.5-NVFP4
    # https://huggingface.co/nvidia/Kimi-K2.5-NVFP4/blob/main/config.json
    hf_to_sglang_mapper = WeightsMapper(
        orig_to_new_prefix={
            "language_model.layers.": "language_model.model.layers.",
        }
    )

    def __init__(
        self,
        config: KimiK25Config,
        quant_config: Optional[QuantizationConfig] = None,
        prefix: str = "",
        **kwargs,  # fix init_tts argument error
    ) -> None:
        super().__init__()
        self.config = config
        self.quant_config = quant_config
        self.use_data_parallel = get_global_server_args().mm_enable_dp_encoder
        # Create vision tower
        self.vision_tower = MoonViT3dPretrainedModel(
            config.vision_config, use_data_parallel=self.use_data_parallel
        )
        # Create mm projector
        self.mm_projector = K2VLMultiModalProjector(config.vision_config)

        self.language_model = DeepseekV3ForCausalLM(config.text_config, quant_config)

        # Ensure that the dtype of the vision_tower and mm_projector matches that of the language_model.
        # This solves the dtype mismatch issue when using device_map="auto" and torch_dtype.
        if hasattr(self.language_model, "dtype"):
            target_dtype = self.language_model.dtype
            self.vision_tower = self.vision_tower.to(dtype=target_dtype)
            self.mm_projector = self.mm_projector.to(dtype=target_dtype)

    def get_image_feature(self, items: List[MultimodalDataItem]) -> torch.Tensor:
        pixel_values = torch.cat([item.feature for item in items], dim=0).type(
            self.vision_tower.dtype
        )
        grid_thws = torch.concat([item.grid_thws for item in items], dim=0).to(
            self.vision_tower.device
        )

        target_dtype = self.vision_tower.patch_embed.proj.weight.dtype
        pixel_values = pixel_values.to(target_dtype)

        if self.use_data_parallel:
            image_embeds = run_dp_sharded_mrope_vision_model(
                self.vision_tower,
                pixel_values,
                grid_thws.tolist(),
                rope_type="rope_2d",
            )
            image_features = self.mm_projector(image_embeds)
            return image_features

        image_features = vision_tower_forward_auto(
            self.vision_tower,
            pixel_values,
            grid_thws,
            mm_projector=self.mm_projector,
        )
        image_features = torch.cat(image_features, dim=0)
        return image_features

    def pad_input_ids(self, input_ids: List[int], mm_inputs: MultimodalInputs):
        pattern = MultiModalityDataPaddingPatternMultimodalTokens()
        return pattern.pad_input_tokens(input_ids, mm_inputs)

    def forward(
        self,
        input_ids: torch.Tensor,
        positions: torch.Tensor,
        forward_batch: ForwardBatch,
        get_embedding: bool = False,
    ):
        hidden_states = general_mm_embed_routine(
            input_ids=input_ids,
            forward_batch=forward_batch,
            language_model=self.language_model,
            data_embedding_funcs={
                Modality.IMAGE: self.get_image_feature,
            },
            positions=positions,
        )

        return hidden_states

    def load_weights(self, weights: Iterable[Tuple[str, torch.Tensor]]):
        """Load weights for the model, separating vision and language weights"""
        mapper = getattr(self, "hf_to_sglang_mapper", None)
        if mapper is not None:
            weights = mapper.apply(weights)

        # Separate vision tower weights and language model weights
        vision_weights = []
        language_weights = []

        for name, loaded_weight in weights:
            if "vision_tower" in name or "mm_projector" in name:
                name = name.replace(r"wqkv.", r"attn.qkv_proj.")
                name = name.replace(r"wo.", r"attn.proj.")
                name = name.replace("mm_projector.proj.0", "mm_projector.linear_1")
                name = name.replace("mm_projector.proj.2", "mm_projector.linear_2")
                vision_weights.append((name, loaded_weight))
            else:
                name = name.replace("language_model.", "")
                # All other weights go to language model
                language_weights.append((name, loaded_weight))

        # Load vision tower weights
        vision_state_dict = dict(vision_weights)
        params_dict = dict(self.named_parameters(remove_duplicate=False))
        for name, loaded_weight in vision_state_dict.items():
            if name not in params_dict:
                raise ValueError(f"Weight {name} not found in params_dict")
            param = params_dict[name]
            weight_loader = getattr(param, "weight_loader", default_weight_loader)
            # loaded_weight = self._pad_vit_attn_dummy_heads(name, loaded_weight)
            weight_loader(param, loaded_weight)

        # Load language model weights
        if language_weights:
            self.language_model.load_weights(language_weights)


EntryClass = [KimiK25ForConditionalGeneration]
