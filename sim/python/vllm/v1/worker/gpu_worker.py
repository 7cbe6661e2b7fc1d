"""The GPU work of one vLLM worker: distributed init, weight load, KV profile, graph capture."""

from __future__ import annotations

import os
import time
from typing import Any

from firedup_sim import clock, faults, gpustate, modelinfo
from firedup_sim.bar import Bar

from vllm.logger import SourceLogger

ps_log = SourceLogger("parallel_state.py")
runner_log = SourceLogger("gpu_model_runner.py")
loader_log = SourceLogger("default_loader.py")
compile_log = SourceLogger("backends.py")
monitor_log = SourceLogger("monitor.py")
worker_log = SourceLogger("gpu_worker.py")


class OutOfMemoryError(RuntimeError):
    pass


OutOfMemoryError.__module__ = "torch"


class Worker:
    def __init__(self, args: Any, rank: int, barrier: Any, holder: gpustate.Holder) -> None:
        self.args = args
        self.rank = rank
        self.tp = args.tensor_parallel_size
        self.barrier = barrier
        self.holder = holder
        self.info = modelinfo.load(args.model)

    def _sync(self) -> None:
        if self.barrier is not None:
            self.barrier.wait()

    def init_device(self) -> None:
        if faults.has("nccl_hang"):
            clock.sleep_forever()
        clock.sleep(0.15)
        if faults.has("nccl_error"):
            raise RuntimeError(
                "NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)"
            )
        ps_log.info(
            1312,
            f"rank {self.rank} in world size {self.tp} is assigned as DP rank 0, PP rank 0, "
            f"PCP rank 0, TP rank {self.rank}, EP rank {self.rank}",
        )
        self.holder.add_gb(0.4)
        self._sync()

    def load_model(self) -> float:
        tic = time.perf_counter()
        runner_log.info(3489, f"Starting to load model {self.args.model}...")
        weight_gb = self.info.weight_gb(self.tp)
        shards = max(self.info.shard_count, 1)
        bar = Bar(shards, "Loading safetensors checkpoint shards", "completed", self.rank == 0)
        for i in range(shards):
            clock.sleep((0.05 + 0.012 * weight_gb) / shards)
            free = gpustate.avail_gb(self.holder.gpu)
            if weight_gb / shards > free or (faults.has("oom_load") and i == shards // 3):
                raise OutOfMemoryError(
                    f"CUDA out of memory. Tried to allocate 1.75 GiB. GPU {self.holder.gpu} has "
                    f"a total capacity of 139.81 GiB of which {max(free, 0):.2f} GiB is free."
                )
            if (
                faults.has("rank_killed")
                and i == shards // 2
                and self.rank == faults.fault_rank(self.tp)
            ):
                os.kill(os.getpid(), 9)
            self.holder.add_gb(weight_gb / shards)
            bar.update(1)
        bar.close()
        loader_log.info(267, f"Loading weights took {time.perf_counter() - tic:.2f} seconds")
        runner_log.info(
            3568,
            f"Model loading took {weight_gb:.4f} GiB memory and "
            f"{time.perf_counter() - tic:.6f} seconds",
        )
        self._sync()
        return weight_gb

    def compile_and_profile(self, max_model_len: int) -> int:
        if not self.args.enforce_eager:
            compile_log.info(548, "Dynamo bytecode transform time: 4.12 s")
            clock.sleep(0.2)
            monitor_log.info(34, "torch.compile takes 6.37 s in total")
        avail = gpustate.avail_gb(self.holder.gpu)
        total = gpustate.TOTAL_MIB / 1024
        kv_gb = avail - total * (1 - self.args.gpu_memory_utilization)
        if kv_gb <= 0:
            raise ValueError(
                "No available memory for the cache blocks. Try increasing "
                "`gpu_memory_utilization` when initializing the engine."
            )
        worker_log.info(298, f"Available KV cache memory: {kv_gb:.2f} GiB")
        self.holder.add_gb(kv_gb)
        self._sync()
        return int(kv_gb * 1024**3 / self.info.kv_bytes_per_token(self.tp))

    def capture(self) -> None:
        if self.args.enforce_eager:
            return
        tic = time.perf_counter()
        slow = faults.has("slow_capture")
        for desc, count in (("mixed prefill-decode, PIECEWISE", 67), ("decode, FULL", 35)):
            bar = Bar(count, f"Capturing CUDA graphs ({desc})", "tqdm", self.rank == 0)
            for i in range(count):
                clock.sleep((0.25 if i == 0 else 0.006) * (10 if slow else 1))
                if faults.has("oom_capture") and i == 3:
                    raise OutOfMemoryError(
                        f"CUDA out of memory. Tried to allocate 2.00 GiB. GPU {self.holder.gpu} "
                        "has a total capacity of 139.81 GiB of which 1.06 GiB is free."
                    )
                bar.update(1)
            bar.close()
        self.holder.add_gb(1.2)
        runner_log.info(
            4389,
            f"Graph capturing finished in {round(time.perf_counter() - tic)} secs, took 1.20 GiB",
        )
        self._sync()
