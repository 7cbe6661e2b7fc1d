"""EAGLEWorker: builds the draft model after the target, then captures the draft graphs."""

from __future__ import annotations

import logging
from typing import Any

from sglang.srt.configs.model_config import ModelConfig
from sglang.srt.model_executor.cuda_graph_runner import run_capture
from sglang.srt.model_executor.model_runner import ModelRunner

logger = logging.getLogger(__name__)


class EAGLEWorker:
    def __init__(self, server_args: Any, target_worker: Any) -> None:
        self.server_args = server_args
        self.target_worker = target_worker
        # The draft must serve the target's context: without --context-length this is the
        # moment (after the whole target load and capture) a too-short draft fails (§4b).
        server_args.context_length = target_worker.model_runner.model_config.context_len
        draft_model_config = ModelConfig(
            server_args.speculative_draft_model_path,
            context_length=server_args.context_length,
            is_draft_model=True,
        )
        self.draft_model_runner = ModelRunner(
            draft_model_config,
            server_args,
            target_worker.gpu_id,
            target_worker.tp_rank,
            target_worker.holder,
            is_draft_worker=True,
            target_num_tokens=target_worker.model_runner.max_total_num_tokens,
        )
        self.draft_model = self.draft_model_runner.model

        # Share the embedding and lm_head of the target (eagle_worker.py:157 in 0.5.9).
        embed, head = self.target_worker.model_runner.model.get_embed_and_head()
        if getattr(self.draft_model, "load_lm_head_from_target", False):
            self.draft_model.set_embed_and_head(embed, head)
        else:
            self.draft_model.set_embed(embed)

        self.init_cuda_graphs()

    def init_cuda_graphs(self) -> None:
        if self.server_args.disable_cuda_graph:
            return
        self.cuda_graph_runner = run_capture(self.draft_model_runner, "draft")
        self.cuda_graph_runner_for_draft_extend = run_capture(
            self.draft_model_runner, "draft extend"
        )
