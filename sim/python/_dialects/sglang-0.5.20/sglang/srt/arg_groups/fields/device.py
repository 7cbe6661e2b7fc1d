"""Config fields of the `device` namespace (simulated subset; names, aliases, defaults real)."""

from __future__ import annotations

from sglang.srt.arg_groups.arg_utils import A


class Device:
    _NS_PATH = "device"
    device: A[str, "The device to use ('cuda', 'xpu', 'hpu', 'npu', 'cpu')."] = "cuda"
    base_gpu_id: A[int, "The base GPU ID to start allocating GPUs from."] = 0
    random_seed: A[int | None, "The random seed."] = None
    watchdog_timeout: A[float, "Set watchdog timeout in seconds."] = 300
