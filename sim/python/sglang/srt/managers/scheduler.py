"""The scheduler process of one TP rank: builds the workers, reports ready, serves batches."""

from __future__ import annotations

import faulthandler
import logging
import os
import signal
import sys
from typing import Any

from firedup_sim import proctitle
from sglang.srt.distributed import parallel_state
from sglang.srt.managers.scheduler_loop import SchedulerLoop
from sglang.srt.managers.tp_worker import TpModelWorker
from sglang.srt.model_executor.cuda_graph_runner import default_cuda_graph_max_bs
from sglang.srt.speculative.eagle_worker import EAGLEWorker
from sglang.srt.utils import (
    configure_logger,
    get_available_gpu_memory,
    get_exception_traceback,
    kill_itself_when_parent_died,
)

logger = logging.getLogger(__name__)


class Scheduler:
    def __init__(self, server_args: Any, gpu_id: int, tp_rank: int, title: str) -> None:
        self.server_args = server_args
        self.tp_rank = tp_rank
        self.gpu_id = gpu_id
        self.tp_worker = TpModelWorker(server_args, gpu_id, tp_rank, title)
        self.draft_worker = None
        if server_args.speculative_algorithm in ("EAGLE", "EAGLE3"):
            self.draft_worker = EAGLEWorker(server_args, self.tp_worker)
        runner = self.tp_worker.model_runner
        self.max_total_num_tokens = runner.max_total_num_tokens
        self.context_len = runner.model_config.context_len
        self.max_req_input_len = self.context_len - 1
        if server_args.max_running_requests is not None:
            self.max_running_requests = server_args.max_running_requests
        elif server_args.speculative_algorithm:
            self.max_running_requests = default_cuda_graph_max_bs(server_args)
        else:
            self.max_running_requests = min(self.max_total_num_tokens // 2, 4096)
        parallel_state.barrier()
        if tp_rank == 0:
            avail_mem = get_available_gpu_memory(gpu_id)
            logger.info(
                f"max_total_num_tokens={self.max_total_num_tokens}, "
                f"chunked_prefill_size={server_args.chunked_prefill_size}, "
                f"max_prefill_tokens={server_args.max_prefill_tokens}, "
                f"max_running_requests={self.max_running_requests}, "
                f"context_len={self.context_len}, "
                f"available_gpu_mem={avail_mem:.2f} GB"
            )


def run_scheduler_process(
    server_args: Any,
    gpu_id: int,
    tp_rank: int,
    pipe_writer: Any,
    req_conn: Any,
    barrier: Any,
    server_up: Any,
) -> None:
    # Forked from the launcher: drop its signal handlers, as a freshly spawned process would.
    for sig in (signal.SIGQUIT, signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, signal.SIG_DFL)
    prefix = f" TP{tp_rank}" if server_args.tp_size > 1 else ""
    title = f"sglang::scheduler{prefix.replace(' ', '_')}"
    proctitle.set_title(title)
    faulthandler.enable()
    kill_itself_when_parent_died()
    parent_pid = os.getppid()
    configure_logger(server_args, prefix=prefix)
    parallel_state.set_group(barrier, tp_rank, server_args.tp_size, server_args)

    try:
        scheduler = Scheduler(server_args, gpu_id, tp_rank, title)
        pipe_writer.send(
            {
                "status": "ready",
                "max_total_num_tokens": scheduler.max_total_num_tokens,
                "max_req_input_len": scheduler.max_req_input_len,
                "context_len": scheduler.context_len,
                "max_running_requests": scheduler.max_running_requests,
            }
        )
        SchedulerLoop(scheduler, req_conn, server_up).run()
    except Exception:
        traceback = get_exception_traceback()
        logger.error(f"Scheduler hit an exception: {traceback}")
        sys.stderr.flush()
        os.kill(parent_pid, signal.SIGQUIT)
