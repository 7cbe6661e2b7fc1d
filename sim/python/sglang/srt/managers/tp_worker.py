"""TpModelWorker: the target model config and runner of one TP rank."""

from __future__ import annotations

from typing import Any

from firedup_sim import gpustate
from sglang.srt.configs.model_config import ModelConfig
from sglang.srt.model_executor.model_runner import ModelRunner


class TpModelWorker:
    def __init__(self, server_args: Any, gpu_id: int, tp_rank: int, title: str) -> None:
        self.server_args = server_args
        self.gpu_id = gpu_id
        self.tp_rank = tp_rank
        self.holder = gpustate.Holder(gpu_id, title)
        self.model_config = ModelConfig(
            server_args.model_path, context_length=server_args.context_length
        )
        self.model_runner = ModelRunner(
            self.model_config, server_args, gpu_id, tp_rank, self.holder
        )
