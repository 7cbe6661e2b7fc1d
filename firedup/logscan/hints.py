"""The hint each failure reason carries: what to try next, in one or two sentences."""

from __future__ import annotations

from firedup.logscan.model import Reason

R = Reason
HINTS: dict[Reason, str] = {
    R.OOM: "Memory ran out: lower --mem-fraction-static (vLLM: --gpu-memory-utilization), "
    "lower cuda_graph_max_bs (rendered as the installed release spells it) or the context "
    "length, and check that no leftover process holds GPU memory (nvidia-smi). vLLM on a CPU: "
    "lower VLLM_CPU_KVCACHE_SPACE (the KV cache's GiB) below the node's free memory.",
    R.CONTEXT_LENGTH: "The requested context is longer than the model's (or the EAGLE draft's) "
    "config allows, or than the KV cache can hold: set SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 "
    "in the launch environment (vLLM: VLLM_ALLOW_LONG_MAX_MODEL_LEN=1), or lower "
    "--context-length / --max-model-len.",
    R.MISSING_MODEL_HOOK: "The model class lacks a method the speculative worker calls "
    "(get_embed_and_head, set_eagle3_layers_to_capture...): apply the engine patch that "
    "forwards it to language_model (firedup patches), or upgrade to sglang >= 0.5.10.",
    R.NCCL: "GPU-to-GPU communication failed or timed out: check every GPU is visible and idle, "
    "rerun with NCCL_DEBUG=INFO, try --disable-custom-all-reduce or NCCL_P2P_DISABLE=1; "
    "multi-node: check --dist-init-addr and NCCL_SOCKET_IFNAME.",
    R.PORT_IN_USE: "The port is already taken, often by an earlier server still running: stop "
    "it (fab stop) or choose another --port; `ss -tlnp` shows the holder.",
    R.MODEL_NOT_FOUND: "The model could not be found or read: check that --model-path (and "
    "the draft model path) exists on the node with config.json and complete weight files "
    "(a truncated download reads 'incomplete metadata': fetch it again), or that HF_TOKEN "
    "grants access to a gated repo.",
    R.CUDA_GRAPH_CAPTURE: "CUDA graph capture failed: lower --mem-fraction-static, lower the "
    "deployment's cuda_graph_max_bs (--cuda-graph-max-bs-decode from SGLang 0.5.14, "
    "--cuda-graph-max-bs before), or as a last resort --disable-cuda-graph.",
    R.WARMUP_FAILED: "The model loaded but the warmup request failed: read the excerpt; raise "
    "SGLANG_WARMUP_TIMEOUT if the first request is just slow, or use --skip-server-warmup.",
    R.ENGINE_INIT: "The engine says its initialization failed and the log names no cause "
    "firedup recognises: look above the excerpt in the full log (another process may have "
    "printed the root cause). If vLLM timed out waiting for the engine core (slow weight "
    "loading), raise VLLM_ENGINE_READY_TIMEOUT_S.",
    R.KILLED: "A server process was killed without a Python error (exit code -9 is SIGKILL, "
    "often the kernel OOM killer): check `dmesg -T | grep -i oom` and host memory, and "
    "whether someone stopped the server.",
    R.BAD_ARGS: "The engine refused its command line before loading anything: a flag or value "
    "the installed release does not accept (the line names it). `fab preflight` checks every "
    "flag against the release on the node and names the closest valid one; a deploy renders "
    "the launch for that release.",
    R.JIT_BUILD: "A kernel the engine compiles at startup (flashinfer, torch extensions) failed to "
    "build: install ninja and a CUDA toolkit whose nvcc matches the driver and torch, clear "
    "~/.cache/flashinfer and ~/.cache/torch_extensions, or pick another attention backend.",
    R.NO_KERNEL_IMAGE: "The installed wheels carry no kernels for this GPU's architecture: use a "
    "build compiled for its compute capability (e.g. cu128 wheels for Blackwell) or build from "
    "source with TORCH_CUDA_ARCH_LIST set.",
    R.UNSUPPORTED_GPU: "The GPU lacks a feature the configuration needs (bfloat16 needs compute "
    "capability 8.0, Triton's compiler behind torch.compile 7.0): pass --dtype half (float16), "
    "skip the compilation (vLLM: --enforce-eager), or use a newer GPU.",
    R.UNSUPPORTED_MODEL: "This engine version does not know the model's architecture or "
    "model_type: upgrade the engine (and transformers), check config.json's architectures and "
    "model_type, or pass --trust-remote-code if the model ships its own code.",
    R.FATAL_PYTHON_ERROR: "The interpreter died in native code (segfault or abort in an extension "
    "module): read the frames above the extension module list; mismatched torch/CUDA/engine "
    "builds and NCCL or driver faults are the usual causes.",
    R.CRASH: "The server died of an error firedup has no signature for: read the excerpt; if it "
    "recurs, add the log as a fixture pair (docs/log-analysis.md).",
}
