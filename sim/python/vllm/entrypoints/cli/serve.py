"""`vllm serve --headless`: a node of rank > 0 runs its TP workers and no API server.

As vLLM 0.33 `cli/serve.py` `run_headless` does for multi-node TP/PP: log the head node's
address, start a multiproc executor for this node's ranks and monitor them inline. The
workers join the head at --master-addr:--master-port before loading (the head waits for
every node there). When the head is gone this node shuts its workers down and exits 1; that
message is the simulator's own (a real node would see its NCCL peers vanish).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from typing import Any

from firedup_sim import proctree, rendezvous

from vllm import logger as vlogger
from vllm.v1.engine.core import _worker_died
from vllm.v1.executor import multiproc_executor
from vllm.version import __version__

serve_log = vlogger.SourceLogger("serve.py")
exec_log = vlogger.SourceLogger("multiproc_executor.py")


def run_headless(args: argparse.Namespace) -> None:
    vlogger.configure("MainProcess")
    if args.api_server_count is not None and args.api_server_count > 1:
        raise ValueError("api_server_count can't be set in headless mode")
    if args.nnodes <= 1 or args.node_rank <= 0:
        raise ValueError("data_parallel_size_local must be > 0 in headless mode")
    head = f"{args.master_addr}:{args.master_port}"
    serve_log.info(
        224,
        f"Launching vLLM (v{__version__}) headless multiproc executor, with head node address "
        f"{head} for torch.distributed process group.",
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda s, f: stop.set())
    signal.signal(signal.SIGINT, lambda s, f: stop.set())
    try:
        code = _run(args, head, stop)
    finally:
        proctree.kill_descendants(os.getpid())
    sys.exit(code)


def _run(args: argparse.Namespace, head: str, stop: threading.Event) -> int:
    conns = rendezvous.rendezvous(head, args.nnodes, args.node_rank, hold=True)
    lost = threading.Event()
    threading.Thread(
        target=lambda: (rendezvous.wait_closed(conns[0]), lost.set()), daemon=True
    ).start()
    args.max_model_len_resolved = _verified(args)
    never = threading.Event()  # no API server here: the workers' "server up" never comes
    workers = multiproc_executor.start_workers(args, never)
    ranks = list(multiproc_executor.local_ranks(args))
    while not stop.wait(0.2):
        if lost.is_set():
            exec_log.error(
                300, f"Connection to the head node {head} was lost; shutting down executor."
            )
            return 1
        for index, (proc, _) in enumerate(workers):
            if not proc.is_alive():
                _worker_died(proc, ranks[index])
                return 1
        _drain(workers)
    return 0


def _drain(workers: list[tuple[Any, Any]]) -> None:
    """Workers report their stages to the engine core; here nobody needs them."""
    for _, conn in workers:
        while conn.poll(0):
            try:
                conn.recv()
            except EOFError:
                break


def _verified(args: argparse.Namespace) -> int:
    """A headless rank builds the engine config too: the same max_model_len check (0.32)."""
    from firedup_sim import modelinfo

    from vllm.config.model import verify_max_model_len

    info = modelinfo.load(args.model)
    return verify_max_model_len(
        info.config, args.model, args.max_model_len, {"model": args.model, **vars(args)}
    )
