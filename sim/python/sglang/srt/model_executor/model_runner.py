"""ModelRunner: init distributed, load weights, KV pool, CUDA graphs (0.5.9 log lines)."""

from __future__ import annotations

import logging
import os
import time

from firedup_sim import clock, faults, gpustate
from firedup_sim.bar import Bar
from sglang.srt._sim_torch import OutOfMemoryError
from sglang.srt.configs.model_config import ModelConfig
from sglang.srt.distributed import parallel_state
from sglang.srt.model_executor.cuda_graph_runner import run_capture
from sglang.srt.models import registry
from sglang.srt.server_args import ServerArgs
from sglang.srt.utils import get_available_gpu_memory
from sglang.version import __version_tuple__

logger = logging.getLogger(__name__)

NEW_DIALECT = __version_tuple__ >= (0, 5, 23)
# Read off the wheels (firedup/releases/conformance.json): "KV Cache is allocated" is gone
# from 0.5.17 ("Memory pool end" stays), the init_torch_distributed lines from 0.5.21.
LOGS_KV_ALLOCATED = __version_tuple__ < (0, 5, 17)
LOGS_INIT_DISTRIBUTED = __version_tuple__ < (0, 5, 21)


def default_mem_fraction(server_args: ServerArgs) -> float:
    if server_args.mem_fraction_static is not None:
        return server_args.mem_fraction_static
    return 0.85 if server_args.speculative_algorithm else 0.88


class ModelRunner:
    def __init__(
        self,
        model_config: ModelConfig,
        server_args: ServerArgs,
        gpu_id: int,
        tp_rank: int,
        holder: gpustate.Holder,
        is_draft_worker: bool = False,
        target_num_tokens: int | None = None,
    ) -> None:
        self.model_config = model_config
        self.server_args = server_args
        self.gpu_id = gpu_id
        self.tp_rank = tp_rank
        self.tp_size = server_args.tp_size
        self.holder = holder
        self.is_draft_worker = is_draft_worker
        self.target_num_tokens = target_num_tokens
        self.mem_fraction_static = default_mem_fraction(server_args)
        self.eagle_use_aux_hidden_state = False
        self.eagle_aux_hidden_state_layer_ids = None
        if server_args.speculative_algorithm == "EAGLE3" and not is_draft_worker:
            # The target reads the draft's eagle_config before loading anything; with an
            # explicit --context-length this is where a too-short draft fails (engines.md §4a).
            draft_model_config = ModelConfig(
                server_args.speculative_draft_model_path,
                context_length=server_args.context_length,
                is_draft_model=True,
            )
            eagle_config = getattr(draft_model_config.hf_config, "eagle_config", None)
            if eagle_config is not None:
                self.eagle_use_aux_hidden_state = eagle_config.use_aux_hidden_state
                self.eagle_aux_hidden_state_layer_ids = (
                    eagle_config.eagle_aux_hidden_state_layer_ids
                )
        min_per_gpu_memory = self.init_torch_distributed()
        self.initialize(min_per_gpu_memory)

    def initialize(self, min_per_gpu_memory: float) -> None:
        self.load_model()
        self.init_memory_pool(min_per_gpu_memory)
        self.graph_runner = None
        self.graph_mem_usage = 0.0
        if not self.is_draft_worker:
            self.init_device_graphs()
        if self.eagle_use_aux_hidden_state:
            self.model.set_eagle3_layers_to_capture(self.eagle_aux_hidden_state_layer_ids)

    def init_torch_distributed(self) -> float:
        if LOGS_INIT_DISTRIBUTED:
            logger.info("Init torch distributed begin.")
        tic = time.perf_counter()
        before = get_available_gpu_memory(self.gpu_id)
        clock.sleep(0.15 if not self.is_draft_worker else 0.05)
        if not self.is_draft_worker:
            parallel_state.init_distributed_environment(self.tp_size, self.tp_rank)
            self.holder.add_gb(0.35)
        after = get_available_gpu_memory(self.gpu_id)
        if LOGS_INIT_DISTRIBUTED:
            logger.info(
                f"Init torch distributed ends. elapsed={time.perf_counter() - tic:.2f} s, "
                f"mem usage={before - after:.2f} GB"
            )
        return after

    def load_model(self) -> None:
        tic_total = time.perf_counter()
        before = get_available_gpu_memory(self.gpu_id)
        logger.info(f"Load weight begin. avail mem={before:.2f} GB")
        info = self.model_config.info
        weight_gb = info.weight_gb(self.tp_size)
        model_class = registry.resolve(self.model_config.architecture)
        self.model = model_class(self.model_config.hf_config, None)
        shards = max(info.shard_count, 1)
        bar = Bar(shards, "Loading safetensors checkpoint shards", "completed", self.tp_rank == 0)
        per_shard_s = (0.05 + 0.012 * weight_gb) / shards
        for i in range(shards):
            clock.sleep(per_shard_s)
            self._maybe_fail_loading(i, shards, weight_gb)
            self.holder.add_gb(weight_gb / shards)
            bar.update(1)
        bar.close()
        self.model.load_weights([(f"model.layers.{i}.weight", None) for i in range(shards)])
        parallel_state.barrier()
        after = get_available_gpu_memory(self.gpu_id)
        dtype = "" if NEW_DIALECT else "dtype=torch.bfloat16, "
        logger.info(
            f"Load weight end. elapsed={time.perf_counter() - tic_total:.2f} s, "
            f"type={type(self.model).__name__}, {dtype}"
            f"avail mem={after:.2f} GB, mem usage={before - after:.2f} GB."
        )

    def _maybe_fail_loading(self, shard: int, shards: int, weight_gb: float) -> None:
        free_gb = get_available_gpu_memory(self.gpu_id)
        need_gb = weight_gb / shards
        if need_gb > free_gb or (faults.has("oom_load") and shard == shards // 3):
            raise OutOfMemoryError(oom_message(self.gpu_id, max(need_gb, 1.75)))
        if (
            faults.has("rank_killed")
            and not self.is_draft_worker
            and shard == shards // 2
            and self.tp_rank == faults.fault_rank(self.tp_size)
        ):
            # What the kernel OOM killer does: no Python exception, no log line.
            os.kill(os.getpid(), 9)

    def init_memory_pool(self, total_gpu_memory: float) -> None:
        info = self.model_config.info
        avail = get_available_gpu_memory(self.gpu_id)
        total_gb = gpustate.TOTAL_MIB / 1024
        per_token = info.kv_bytes_per_token(self.tp_size)
        if self.target_num_tokens is not None:
            # The draft shares the target's token slots: same #tokens, its own (small) layers.
            self.max_total_num_tokens = self.target_num_tokens
        else:
            rest = avail - total_gb * (1 - self.mem_fraction_static)
            self.max_total_num_tokens = int(rest * 1024**3 / per_token) if rest > 0 else 0
        if self.server_args.max_total_tokens is not None:
            self.max_total_num_tokens = min(
                self.max_total_num_tokens, self.server_args.max_total_tokens
            )
        if self.max_total_num_tokens <= 0:
            raise RuntimeError("Not enough memory. Please try to increase --mem-fraction-static.")
        clock.sleep(0.05)
        kv_gb = self.max_total_num_tokens * per_token / 1024**3
        self.holder.add_gb(kv_gb)
        if LOGS_KV_ALLOCATED:
            self._log_kv_allocated(info.is_mla, kv_gb)
        logger.info(f"Memory pool end. avail mem={get_available_gpu_memory(self.gpu_id):.2f} GB")

    def _log_kv_allocated(self, is_mla: bool, kv_gb: float) -> None:
        dtype = "dtype: torch.bfloat16, " if NEW_DIALECT else ""
        if is_mla:
            sizes = f"KV size: {kv_gb:.2f} GB"
        else:
            sizes = f"K size: {kv_gb / 2:.2f} GB, V size: {kv_gb / 2:.2f} GB"
        logger.info(f"KV Cache is allocated. {dtype}#tokens: {self.max_total_num_tokens}, {sizes}")

    def init_device_graphs(self) -> None:
        if self.server_args.disable_cuda_graph:
            return
        self.graph_runner = run_capture(self, "target")


def oom_message(gpu_id: int, need_gb: float) -> str:
    free = get_available_gpu_memory(gpu_id)
    total = gpustate.TOTAL_MIB / 1024
    return (
        f"CUDA out of memory. Tried to allocate {need_gb:.2f} GiB. GPU {gpu_id} has a total "
        f"capacity of {total:.2f} GiB of which {max(free, 0.0):.2f} GiB is free. Including "
        f"non-PyTorch memory, this process has {total - free:.2f} GiB memory in use. Of the "
        f"allocated memory {max(total - free - 1.1, 0):.2f} GiB is allocated by PyTorch, and "
        "312.55 MiB is reserved by PyTorch but unallocated. If reserved but unallocated memory "
        "is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid "
        "fragmentation.  See documentation for Memory Management  "
        "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
    )
