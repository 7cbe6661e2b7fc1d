"""Worker processes (TP > 1): `VLLM::Worker_TP<n>`, children of the engine core."""

from __future__ import annotations

import multiprocessing as mp
import signal
import sys
import traceback
from typing import Any

from firedup_sim import clock, faults, gpustate, proctitle

from vllm import logger as vlogger
from vllm.v1.worker.gpu_worker import Worker

log = vlogger.SourceLogger("multiproc_executor.py")
CRASH_AFTER_READY_S = 2.0


def run_worker(args: Any, rank: int, gpu: int, barrier: Any, conn: Any, server_up: Any) -> None:
    for sig in (signal.SIGQUIT, signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, signal.SIG_DFL)
    title = f"VLLM::Worker_TP{rank}"
    proctitle.set_title(title)
    proctitle.die_with_parent()
    vlogger.configure(f"Worker_TP{rank}")
    try:
        info = run_steps(args, rank, barrier, gpustate.Holder(gpu, title), conn)
        conn.send({"stage": "ready", **info})
    except Exception:
        log.error(772, "WorkerProc failed to start.\n" + traceback.format_exc().rstrip())
        sys.exit(1)
    crashes = faults.has("crash_after_ready") and rank == faults.fault_rank(
        args.tensor_parallel_size
    )
    server_up.wait()
    if not crashes:
        clock.sleep_forever()
    clock.sleep(CRASH_AFTER_READY_S)
    try:
        execute_model()
    except Exception:
        log.error(827, "WorkerProc hit an exception.\n" + traceback.format_exc().rstrip())
        sys.exit(1)


def execute_model() -> None:
    raise RuntimeError("CUDA error: an illegal memory access was encountered")


def run_steps(
    args: Any, rank: int, barrier: Any, holder: Any, conn: Any, on_kv: Any = None
) -> dict[str, Any]:
    worker = Worker(args, rank, barrier, holder)
    worker.init_device()
    worker.load_model()
    tokens = worker.compile_and_profile(args.max_model_len_resolved)
    # The KV cache is sized (and "GPU KV cache size" logged) before the graphs are captured,
    # as in the real engine (tests/sim/test_vllm_real_order.py).
    if conn is not None and rank == 0:
        conn.send({"stage": "kv", "tokens": tokens})
    if on_kv is not None:
        on_kv(tokens)
    worker.capture()
    return {"tokens": tokens}


def local_ranks(args: Any) -> range:
    """The TP ranks on this node: tp is spread over --nnodes, node by node."""
    per_node = max(1, args.tensor_parallel_size // max(1, args.nnodes))
    first = per_node * args.node_rank
    return range(first, first + per_node)


def start_workers(args: Any, server_up: Any) -> list[tuple[Any, Any]]:
    ctx = mp.get_context("fork")
    ranks = local_ranks(args)
    barrier = ctx.Barrier(len(ranks))
    workers = []
    sys.stdout.flush()
    sys.stderr.flush()
    for gpu, rank in enumerate(ranks):
        parent_conn, child_conn = ctx.Pipe()
        proc = ctx.Process(
            target=run_worker,
            args=(args, rank, gpu, barrier, child_conn, server_up),
            daemon=True,
        )
        proc.start()
        child_conn.close()
        workers.append((proc, parent_conn))
    return workers
