"""CudaGraphRunner: captures one graph per batch size, largest first, rank 0 draws the bar."""

from __future__ import annotations

import logging
import time
from typing import Any

from firedup_sim import clock, faults
from firedup_sim.bar import Bar
from sglang.srt._sim_torch import OutOfMemoryError
from sglang.srt.distributed import parallel_state
from sglang.srt.utils import get_available_gpu_memory
from sglang.version import __version_tuple__

logger = logging.getLogger(__name__)

CUDA_GRAPH_CAPTURE_FAILED_MSG = (
    "Possible solutions:\n"
    "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)\n"
    "2. set --cuda-graph-max-bs to a smaller value (e.g., 16)\n"
    "3. disable torch compile by not using --enable-torch-compile\n"
    "4. disable CUDA graph by --disable-cuda-graph. (Not recommended. Huge performance loss)\n"
    "Open an issue on GitHub https://github.com/sgl-project/sglang/issues/new/choose \n"
)

# Nominal seconds: the first batch size includes JIT/autotune work, so 0/N sits a while.
FIRST_BS_S = {"target": 0.3, "draft": 0.8, "draft extend": 0.2}
NEXT_BS_S = 0.012


def default_cuda_graph_max_bs(server_args: Any) -> int:
    if server_args.cuda_graph_max_bs is not None:
        return int(server_args.cuda_graph_max_bs)
    return 48 if server_args.speculative_algorithm else 160


def get_batch_sizes_to_capture(server_args: Any) -> list[int]:
    max_bs = default_cuda_graph_max_bs(server_args)
    if server_args.speculative_algorithm:
        candidates = (
            list(range(1, 9))
            + list(range(10, 33, 2))
            + list(range(40, 65, 4))
            + list(range(72, 257, 8))
            + list(range(272, max(max_bs, 272) + 1, 16))
        )
    else:
        candidates = [1, 2, 4, 8, 12, *range(16, max(max_bs, 16) + 1, 8)]
    capture_bs = [bs for bs in candidates if bs <= max_bs]
    return capture_bs or [1]


class CudaGraphRunner:
    """role is "target", "draft" or "draft extend" (the EAGLE draft runners reuse capture)."""

    def __init__(self, model_runner: Any, role: str = "target") -> None:
        self.model_runner = model_runner
        self.role = role
        self.capture_bs = get_batch_sizes_to_capture(model_runner.server_args)
        self.tp_rank = model_runner.tp_rank
        self.gpu_id = model_runner.gpu_id
        new_dialect = __version_tuple__ >= (0, 5, 23)
        if self.tp_rank == 0 and role == "target" and not new_dialect:
            logger.info(f"Capture cuda graph bs {self.capture_bs}")
        if (
            role == "target"
            and model_runner.server_args.speculative_algorithm == "EAGLE3"
            and model_runner.eagle_use_aux_hidden_state
        ):
            self.model_runner.model.set_eagle3_layers_to_capture()
        try:
            self.capture()
        except RuntimeError as e:
            # No "from e", as in sglang: the log shows "During handling of the above ...".
            raise Exception(f"Capture cuda graph failed: {e}\n{CUDA_GRAPH_CAPTURE_FAILED_MSG}")  # noqa: B904

    def capture(self) -> None:
        slow = faults.has("slow_capture")
        first_s = FIRST_BS_S[self.role] * (12 if slow else 1)
        next_s = NEXT_BS_S * (4 if slow else 1)
        bar = (
            Bar(len(self.capture_bs), "", "tqdm", self.tp_rank == 0) if self.tp_rank == 0 else None
        )
        for i, bs in enumerate(reversed(self.capture_bs)):
            if bar is not None:
                avail_mem = get_available_gpu_memory(self.gpu_id)
                bar.set_description(f"Capturing batches (bs={bs} avail_mem={avail_mem:.2f} GB)")
            tic = time.perf_counter()
            clock.sleep(first_s if i == 0 else next_s)
            self.capture_one_batch_size(bs, i)
            self.model_runner.holder.add_gb(0.04 if i else 0.4)
            _ = time.perf_counter() - tic
            if bar is not None:
                bar.update(1)
        if bar is not None:
            bar.close()

    def capture_one_batch_size(self, bs: int, index: int) -> None:
        if faults.has("oom_capture") and self.role == "target" and index == 2:
            raise OutOfMemoryError(
                f"CUDA out of memory. Tried to allocate 2.00 GiB. GPU {self.gpu_id} has a total "
                f"capacity of 139.81 GiB of which 1.06 GiB is free. Process has 138.74 GiB "
                "memory in use. Of the allocated memory 135.02 GiB is allocated by PyTorch, and "
                "1.21 GiB is reserved by PyTorch but unallocated."
            )


def _backend(model_runner: Any) -> str:
    return "fa3" if model_runner.model_config.info.is_mla else "flashinfer"


def _begin_line(model_runner: Any, role: str, capture_bs: list[int], avail: float) -> str:
    if __version_tuple__ < (0, 5, 23):
        name = "cuda graph" if role == "target" else f"{role} cuda graph"
        return (
            f"Capture {name} begin. This can take up to several minutes. avail mem={avail:.2f} GB"
        )
    args = model_runner.server_args
    spec = args.speculative_algorithm is not None
    tokens = args.speculative_num_draft_tokens if spec and role != "draft" else 1
    head = f"backend={_backend(model_runner)}, num_tokens_per_req={tokens}"
    if role == "target":
        name = _new_name(model_runner, role)
        return f"Capture {name} CUDA graph begin. {head}, avail mem={avail:.2f} GB"
    return (
        f"Capture {_new_name(model_runner, role)} CUDA graph begin. {head}, bs={capture_bs}, "
        f"avail mem={avail:.2f} GB"
    )


def _new_name(model_runner: Any, role: str) -> str:
    if role == "target":
        spec = model_runner.server_args.speculative_algorithm is not None
        return "target verify" if spec else "target decode"
    return "draft decode" if role == "draft" else "draft extend"


def _end_line(
    model_runner: Any, role: str, capture_bs: list[int], elapsed: float, usage: float, avail: float
) -> str:
    if __version_tuple__ < (0, 5, 23):
        name = "cuda graph" if role == "target" else f"{role} cuda graph"
        return (
            f"Capture {name} end. Time elapsed: {elapsed:.2f} s. "
            f"mem usage={usage:.2f} GB. avail mem={avail:.2f} GB."
        )
    return (
        f"Capture {_new_name(model_runner, role)} CUDA graph end. bs={capture_bs}, "
        f"elapsed={elapsed:.2f} s, mem usage={usage:.2f} GB, avail mem={avail:.2f} GB."
    )


def run_capture(model_runner: Any, role: str) -> CudaGraphRunner:
    """Logs the begin line, captures, logs the end line; returns the runner."""
    tic = time.perf_counter()
    before = get_available_gpu_memory(model_runner.gpu_id)
    capture_bs = get_batch_sizes_to_capture(model_runner.server_args)
    logger.info(_begin_line(model_runner, role, capture_bs, before))
    runner = CudaGraphRunner(model_runner, role)
    parallel_state.barrier()  # captured graphs hold collectives: ranks finish together
    after = get_available_gpu_memory(model_runner.gpu_id)
    model_runner.graph_mem_usage = before - after
    logger.info(
        _end_line(model_runner, role, capture_bs, time.perf_counter() - tic, before - after, after)
    )
    return runner
