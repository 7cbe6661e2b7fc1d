"""The scheduler's event loop after ready: serve generation requests, log batches, faults."""

from __future__ import annotations

import logging
import os
import signal
import time
from typing import Any

from firedup_sim import clock, faults
from firedup_sim.clock import request_latency_s

logger = logging.getLogger("sglang.srt.managers.scheduler")

DECODE_LOG_EVERY_S = 3.0  # nominal seconds between "Decode batch" lines once up (spec on)
CRASH_AFTER_READY_S = 2.0  # nominal seconds from "fired up" to the crash_after_ready fault


class SchedulerLoop:
    def __init__(self, scheduler: Any, req_conn: Any, server_up: Any) -> None:
        self.scheduler = scheduler
        self.args = scheduler.server_args
        self.req_conn = req_conn
        self.server_up = server_up
        self.spec = self.args.speculative_algorithm is not None
        self.crash_at: float | None = None
        self.next_decode_log: float | None = None
        self.served = 0
        self.tokens = 0

    def run(self) -> None:
        after_ready = faults.has("crash_after_ready") or faults.has("worker_exit_after_ready")
        crashes = after_ready and self.scheduler.tp_rank == faults.fault_rank(self.args.tp_size)
        while True:
            self._on_tick(crashes)
            if self.req_conn is None:
                time.sleep(self._timeout())
                continue
            if self.req_conn.poll(self._timeout()):
                self.req_conn.send(self.handle(self.req_conn.recv()))

    def _timeout(self) -> float:
        if self.crash_at is None and self.next_decode_log is None:
            return 0.2 if not self.server_up.is_set() else 1.0
        deadlines = [t for t in (self.crash_at, self.next_decode_log) if t is not None]
        return max(0.01, min(deadlines) - time.monotonic())

    def _on_tick(self, crashes: bool) -> None:
        now = time.monotonic()
        if self.server_up.is_set():
            if crashes and self.crash_at is None:
                self.crash_at = now + clock.scaled(CRASH_AFTER_READY_S)
            if self.spec and self.scheduler.tp_rank == 0 and self.next_decode_log is None:
                self.next_decode_log = now + clock.scaled(DECODE_LOG_EVERY_S)
        if self.crash_at is not None and now >= self.crash_at:
            if faults.has("worker_exit_after_ready"):
                # Killed from outside (the OOM killer): no word in the log, and nobody notices:
                # /health stays 200 (it asks no worker), as in vllm#16259.
                os.kill(os.getpid(), signal.SIGKILL)
            self.forward_decode()
        if self.next_decode_log is not None and now >= self.next_decode_log:
            self.log_decode_stats()
            self.next_decode_log = now + clock.scaled(DECODE_LOG_EVERY_S)

    def forward_decode(self) -> None:
        raise RuntimeError(
            "CUDA error: an illegal memory access was encountered\n"
            "CUDA kernel errors might be asynchronously reported at some other API call, so the "
            "stacktrace below might be incorrect.\n"
            "For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
            "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n"
        )

    def handle(self, req: dict[str, Any]) -> dict[str, Any]:
        if req.get("internal_state"):  # /server_info's question: no batch, no log line
            state = {"last_gen_throughput": 0.0, "memory_usage": {}}
            return {"ok": True, "state": {**state, "avg_spec_accept_length": None}}
        input_len = int(req.get("input_len", 1))
        logger.info(
            f"Prefill batch, #new-seq: 1, #new-token: {input_len}, #cached-token: 0, "
            f"token usage: 0.00, #running-req: 0, #queue-req: 0, "
            f"input throughput (token/s): {input_len * 31.7:.2f}, cuda graph: False"
        )
        if req.get("warmup"):
            clock.sleep(0.25)  # first real forward: JIT kernels, the 7-19 s gap seen on nodes
        if req.get("warmup") and faults.has("warmup_fail"):
            return {
                "ok": False,
                "error": "Warmup request failed: CUDA error: device-side assert triggered",
            }
        new_tokens = int(req.get("max_new_tokens", 8))
        clock.sleep(0.002 * new_tokens)
        if not req.get("warmup"):
            time.sleep(request_latency_s())  # real seconds: requests in flight during a roll
        self.served += 1
        self.tokens += input_len + new_tokens
        return {"ok": True, "completion_tokens": new_tokens, "accept_len": self._accept_len()}

    def _accept_len(self) -> float:
        steps = self.args.speculative_num_steps or 0
        if not self.spec:
            return 1.0
        return round(1.0 + steps * (0.62 + 0.05 * ((self.served * 7) % 5) / 4), 2)

    def log_decode_stats(self) -> None:
        accept_len = self._accept_len()
        draft_tokens = self.args.speculative_num_draft_tokens or 1
        usage = self.tokens / max(self.scheduler.max_total_num_tokens, 1)
        logger.info(
            f"Decode batch, #running-req: 1, #token: {self.tokens}, token usage: {usage:.2f}, "
            f"accept len: {accept_len:.2f}, accept rate: {accept_len / draft_tokens:.2f}, "
            f"cuda graph: True, gen throughput (token/s): {41.5 * accept_len:.2f}, #queue-req: 0"
        )
