"""Launch the scheduler (one per TP rank on this node) and detokenizer processes, wait ready."""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import signal
import sys
from dataclasses import dataclass
from typing import Any

from firedup_sim import clock, events
from sglang.srt.managers.detokenizer_manager import run_detokenizer_process
from sglang.srt.managers.scheduler import run_scheduler_process
from sglang.srt.utils import kill_process_tree
from sglang.version import __version_tuple__

logger = logging.getLogger(__name__)


@dataclass
class Subprocesses:
    scheduler_procs: list[Any]
    scheduler_infos: list[dict[str, Any]]
    rank0_conn: Any  # request channel to the TP0 scheduler (None on nodes without TP0)
    server_up: Any  # set once warmup succeeded: schedulers start their running-phase work


def launch_phase_sigquit_handler(signum: int, frame: Any) -> None:
    logger.error("Received sigquit from a child process. It usually means the child failed.")
    events.record("crashed")
    kill_process_tree(os.getpid())


def _launch_subprocesses(server_args: Any) -> Subprocesses:
    signal.signal(signal.SIGQUIT, launch_phase_sigquit_handler)
    ctx = mp.get_context("fork")
    ranks_per_node = server_args.tp_size // server_args.nnodes
    first_rank = ranks_per_node * server_args.node_rank
    barrier = ctx.Barrier(ranks_per_node) if ranks_per_node > 1 else None
    server_up = ctx.Event()
    readers, procs, rank0_conn = [], [], None
    sys.stdout.flush()
    sys.stderr.flush()
    for local in range(ranks_per_node):
        tp_rank = first_rank + local
        reader, writer = ctx.Pipe(duplex=False)
        child_conn = None
        if tp_rank == 0:
            rank0_conn, child_conn = ctx.Pipe()
        gpu_id = server_args.base_gpu_id + local
        proc = ctx.Process(
            target=run_scheduler_process,
            args=(server_args, gpu_id, tp_rank, writer, child_conn, barrier, server_up),
            daemon=True,
        )
        proc.start()
        writer.close()
        readers.append(reader)
        procs.append(proc)
    if server_args.node_rank == 0:
        detoken = ctx.Process(target=run_detokenizer_process, args=(server_args,), daemon=True)
        detoken.start()
    if __version_tuple__ >= (0, 5, 10):
        infos = _wait_for_scheduler_ready_polling(readers, procs, first_rank)
    else:
        infos = _wait_for_scheduler_ready(readers, procs)
    return Subprocesses(procs, infos, rank0_conn, server_up)


def _wait_for_scheduler_ready(scheduler_pipe_readers: list, scheduler_procs: list) -> list:
    """0.5.9: reads rank after rank; a dead higher rank behind a live rank 0 hangs forever."""
    scheduler_infos = []
    for i in range(len(scheduler_pipe_readers)):
        try:
            data = scheduler_pipe_readers[i].recv()
        except EOFError:
            logger.error(f"Rank {i} scheduler is dead. Please check if there are relevant logs.")
            scheduler_procs[i].join()
            logger.error(f"Exit code: {scheduler_procs[i].exitcode}")
            raise

        if data["status"] != "ready":
            raise RuntimeError("Initialization failed. Please see the error messages above.")
        scheduler_infos.append(data)
    return scheduler_infos


def _wait_for_scheduler_ready_polling(readers: list, procs: list, first_rank: int) -> list:
    """0.5.10 (PR #20287): poll every rank and notice any that died."""
    infos: dict[int, dict] = {}
    while len(infos) < len(readers):
        for i, reader in enumerate(readers):
            if i in infos:
                continue
            if reader.poll(clock.scaled(0.5) / len(readers)):
                try:
                    data = reader.recv()
                except EOFError:
                    data = None
                if data is not None:
                    if data["status"] != "ready":
                        raise RuntimeError(
                            "Initialization failed. Please see the error messages above."
                        )
                    infos[i] = data
                    continue
            if not procs[i].is_alive():
                procs[i].join()
                raise RuntimeError(
                    f"Rank {first_rank + i} scheduler died during initialization (exit code: "
                    f"{procs[i].exitcode}). If exit code is -9 (SIGKILL), a common cause is the "
                    "OS OOM killer. Run `dmesg -T | grep -i oom` to check."
                )
    return [infos[i] for i in range(len(readers))]
