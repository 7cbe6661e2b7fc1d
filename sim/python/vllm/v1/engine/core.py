"""The engine core process (`VLLM::EngineCore`): runs the workers, reports ready, serves."""

from __future__ import annotations

import signal
import sys
import time
import traceback
from typing import Any

from firedup_sim import clock, faults, gpustate, proctitle, rendezvous

from vllm import logger as vlogger
from vllm.v1.executor import multiproc_executor
from vllm.version import __version__

core_log = vlogger.SourceLogger("core.py")
kv_log = vlogger.SourceLogger("kv_cache_utils.py")
exec_log = vlogger.SourceLogger("multiproc_executor.py")


# The headless nodes' connections, held open for the engine's life: they see it die.
_PEERS: list[Any] = []


class WorkerDied(Exception):
    pass


def run_engine_core(args: Any, conn: Any, server_up: Any) -> None:
    for sig in (signal.SIGQUIT, signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, signal.SIG_DFL)
    proctitle.set_title("VLLM::EngineCore")
    proctitle.die_with_parent()
    vlogger.configure("EngineCore_DP0")
    tic = time.perf_counter()
    try:
        core_log.info(
            93, f"Initializing a V1 LLM engine (v{__version__}) with config: {_config(args)}"
        )
        workers = _start(args, server_up)
    except Exception:
        core_log.error(866, "EngineCore failed to start.\n" + traceback.format_exc().rstrip())
        conn.send({"status": "failed"})
        sys.exit(1)
    core_log.info(
        259,
        f"init engine (profile, create kv cache, warmup model) took "
        f"{time.perf_counter() - tic:.2f} seconds",
    )
    conn.send({"status": "ready"})
    _serve(args, conn, workers, server_up)


def _config(args: Any) -> str:
    spec = args.speculative_config
    return (
        f"model='{args.model}', speculative_config={spec!r}, tokenizer='{args.model}', "
        f"skip_tokenizer_init=False, tokenizer_mode=auto, revision=None, "
        f"trust_remote_code={args.trust_remote_code}, dtype=torch.bfloat16, "
        f"max_seq_len={args.max_model_len_resolved}, download_dir=None, load_format=auto, "
        f"tensor_parallel_size={args.tensor_parallel_size}, pipeline_parallel_size=1, "
        f"data_parallel_size=1, disable_custom_all_reduce=False, quantization=None, "
        f"enforce_eager={args.enforce_eager}, kv_cache_dtype=auto, device_config=cuda, "
        f"seed=0, served_model_name={args.model}, enable_prefix_caching=True"
    )


def _log_kv(args: Any, tokens: int) -> None:
    # One line in 0.33 (kv_cache_utils.py `update_kv_cache_capacity`, "%s KV cache size").
    length = args.max_model_len_resolved
    kv_log.info(
        1148,
        f"GPU KV cache size: {tokens:,} tokens, Maximum concurrency for {length:,} tokens per "
        f"request: {tokens / length:.2f}x",
    )


def _start(args: Any, server_up: Any) -> list[tuple[Any, Any]]:
    if args.nnodes > 1:
        # The head waits for every headless node at --master-addr:--master-port (torch's
        # process group): a node that never comes leaves it silent here, as NCCL would.
        addr = f"{args.master_addr}:{args.master_port}"
        _PEERS.extend(rendezvous.rendezvous(addr, args.nnodes, 0, hold=True))
    if args.tensor_parallel_size == 1:
        holder = gpustate.Holder(0, "VLLM::EngineCore")
        multiproc_executor.run_steps(args, 0, None, holder, None, lambda t: _log_kv(args, t))
        return []
    workers = multiproc_executor.start_workers(args, server_up)
    ready: set[int] = set()
    while len(ready) < len(workers):
        for rank, (proc, wconn) in enumerate(workers):
            if rank in ready:
                continue
            if wconn.poll(0.02):
                try:
                    msg = wconn.recv()
                except EOFError:
                    msg = None
                if msg and msg["stage"] == "kv":
                    _log_kv(args, msg["tokens"])
                elif msg and msg["stage"] == "ready":
                    ready.add(rank)
                    continue
            if not proc.is_alive():
                _worker_died(proc, rank)
                raise Exception(
                    "WorkerProc initialization failed due to an exception in a background "
                    "process. See stack trace for root cause."
                )
    return workers


def _worker_died(proc: Any, rank: int) -> None:
    proc.join()
    exec_log.error(
        562,
        f"Worker proc VLLM::Worker_TP{rank} died unexpectedly (exit code: {proc.exitcode}), "
        "shutting down executor.",
    )


def _serve(args: Any, conn: Any, workers: list[tuple[Any, Any]], server_up: Any) -> None:
    crash_inline = faults.has("crash_after_ready") and not workers
    crash_at = None
    while True:
        if server_up.is_set() and crash_inline and crash_at is None:
            crash_at = time.monotonic() + clock.scaled(multiproc_executor.CRASH_AFTER_READY_S)
        if crash_at is not None and time.monotonic() >= crash_at:
            try:
                multiproc_executor.execute_model()
            except Exception:
                core_log.error(
                    946, "EngineCore encountered a fatal error.\n" + traceback.format_exc().rstrip()
                )
                sys.exit(1)
        for rank, (proc, _) in enumerate(workers):
            if not proc.is_alive():
                _worker_died(proc, rank)
                core_log.error(946, "EngineCore encountered a fatal error.")
                sys.exit(1)
        if conn.poll(0.2):
            req = conn.recv()
            clock.sleep(0.002 * int(req.get("max_new_tokens", 16)))
            time.sleep(clock.request_latency_s())  # real seconds: in flight during a roll
            conn.send({"ok": True, "completion_tokens": int(req.get("max_new_tokens", 16))})
