"""Config fields of the `exec` namespace (simulated subset; names, aliases, defaults real)."""

from __future__ import annotations

from sglang.srt.arg_groups.arg_utils import A


class ExecKernel:
    _NS_PATH = "exec.kernel"
    attention_backend: A[str | None, "Choose the kernels for attention layers."] = None
    enable_torch_compile: A[bool, "Optimize the model with torch.compile."] = False


class ExecGraph:
    _NS_PATH = "exec.graph"
    cuda_graph_max_bs_decode: A[
        int | None, "Maximum batch size captured for the decode cuda graph."
    ] = None
    cuda_graph_max_bs_prefill: A[
        int | None, "Maximum batch size captured for the prefill cuda graph."
    ] = None
