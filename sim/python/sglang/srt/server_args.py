"""The server arguments: the real flag names, aliases and defaults of sglang 0.5.9."""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass

SPEC_ALGOS = ["EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM"]
LOG_LEVELS = ["debug", "info", "warning", "error", "critical"]


@dataclass
class ServerArgs:
    model_path: str
    tokenizer_path: str | None = None
    tokenizer_mode: str = "auto"
    skip_tokenizer_init: bool = False
    load_format: str = "auto"
    trust_remote_code: bool = False
    dtype: str = "auto"
    kv_cache_dtype: str = "auto"
    quantization: str | None = None
    context_length: int | None = None
    device: str = "cuda"
    served_model_name: str | None = None
    chat_template: str | None = None
    revision: str | None = None
    download_dir: str | None = None
    host: str = "127.0.0.1"
    port: int = 30000
    mem_fraction_static: float | None = None
    max_running_requests: int | None = None
    max_total_tokens: int | None = None
    chunked_prefill_size: int | None = None
    max_prefill_tokens: int = 16384
    page_size: int | None = None
    tp_size: int = 1
    pp_size: int = 1
    dp_size: int = 1
    ep_size: int = 1
    base_gpu_id: int = 0
    random_seed: int | None = None
    watchdog_timeout: float = 300
    dist_timeout: int | None = None
    log_level: str = "info"
    log_level_http: str | None = None
    api_key: str | None = None
    enable_metrics: bool = False
    decode_log_interval: int = 40
    dist_init_addr: str | None = None
    nnodes: int = 1
    node_rank: int = 0
    attention_backend: str | None = None
    disable_cuda_graph: bool = False
    cuda_graph_max_bs: int | None = None
    disable_radix_cache: bool = False
    enable_torch_compile: bool = False
    enable_dp_attention: bool = False
    mm_enable_dp_encoder: bool = False
    skip_server_warmup: bool = False
    tool_call_parser: str | None = None
    reasoning_parser: str | None = None
    speculative_algorithm: str | None = None
    speculative_draft_model_path: str | None = None
    speculative_draft_model_revision: str | None = None
    speculative_draft_load_format: str | None = None
    speculative_num_steps: int | None = None
    speculative_eagle_topk: int | None = None
    speculative_num_draft_tokens: int | None = None

    def __post_init__(self) -> None:
        if self.tokenizer_path is None:
            self.tokenizer_path = self.model_path
        if self.served_model_name is None:
            self.served_model_name = self.model_path
        if self.random_seed is None:
            self.random_seed = 42
        if self.chunked_prefill_size is None:
            self.chunked_prefill_size = 8192 if self.tp_size >= 8 else 4096
        if self.page_size is None:
            self.page_size = 1
        if self.speculative_algorithm is not None:
            self._choose_speculative_params()

    def _choose_speculative_params(self) -> None:
        if self.speculative_num_steps is None:
            self.speculative_num_steps = 3
        if self.speculative_eagle_topk is None:
            self.speculative_eagle_topk = 1
        if self.speculative_num_draft_tokens is None or self.speculative_eagle_topk == 1:
            self.speculative_num_draft_tokens = self.speculative_num_steps + 1

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"


def _add_args(parser: argparse.ArgumentParser) -> None:
    a = parser.add_argument
    a("--model-path", "--model", type=str, required=True, help="The path of the model weights.")
    a("--tokenizer-path", type=str)
    a("--tokenizer-mode", type=str, default="auto", choices=["auto", "slow"])
    a("--skip-tokenizer-init", action="store_true")
    a("--load-format", type=str, default="auto")
    a("--trust-remote-code", action="store_true")
    a("--dtype", type=str, default="auto")
    a("--kv-cache-dtype", type=str, default="auto")
    a("--quantization", type=str)
    a("--context-length", type=int)
    a("--device", type=str, default="cuda")
    a("--served-model-name", type=str)
    a("--chat-template", type=str)
    a("--revision", type=str)
    a("--download-dir", type=str)
    a("--host", type=str, default="127.0.0.1")
    a("--port", type=int, default=30000)
    a("--mem-fraction-static", type=float)
    a("--max-running-requests", type=int)
    a("--max-total-tokens", type=int)
    a("--chunked-prefill-size", type=int)
    a("--max-prefill-tokens", type=int, default=16384)
    a("--page-size", type=int)
    a("--tensor-parallel-size", "--tp-size", type=int, default=1, dest="tp_size")
    a("--pipeline-parallel-size", "--pp-size", type=int, default=1, dest="pp_size")
    a("--data-parallel-size", "--dp-size", type=int, default=1, dest="dp_size")
    a("--expert-parallel-size", "--ep-size", "--ep", type=int, default=1, dest="ep_size")
    a("--base-gpu-id", type=int, default=0)
    a("--random-seed", type=int)
    a("--watchdog-timeout", type=float, default=300)
    a("--dist-timeout", type=int)
    a("--log-level", type=str, default="info", choices=LOG_LEVELS)
    a("--log-level-http", type=str)
    a("--api-key", type=str)
    a("--enable-metrics", action="store_true")
    a("--decode-log-interval", type=int, default=40)
    a("--dist-init-addr", "--nccl-init-addr", type=str)
    a("--nnodes", type=int, default=1)
    a("--node-rank", type=int, default=0)
    a("--attention-backend", type=str)
    a("--disable-cuda-graph", action="store_true")
    a("--cuda-graph-max-bs", type=int)
    a("--disable-radix-cache", action="store_true")
    a("--enable-torch-compile", action="store_true")
    a("--enable-dp-attention", action="store_true")
    a("--mm-enable-dp-encoder", action="store_true")
    a("--skip-server-warmup", action="store_true")
    a("--tool-call-parser", type=str)
    a("--reasoning-parser", type=str)
    a("--speculative-algorithm", type=str, choices=SPEC_ALGOS)
    a("--speculative-draft-model-path", "--speculative-draft-model", type=str)
    a("--speculative-draft-model-revision", type=str)
    a("--speculative-draft-load-format", type=str)
    a("--speculative-num-steps", type=int)
    a("--speculative-eagle-topk", type=int)
    a("--speculative-num-draft-tokens", type=int)


def prepare_server_args(argv: list[str], prog: str | None = None) -> ServerArgs:
    parser = argparse.ArgumentParser(prog=prog)
    _add_args(parser)
    ns = parser.parse_args(argv)
    names = {f.name for f in dataclasses.fields(ServerArgs)}
    return ServerArgs(**{k: v for k, v in vars(ns).items() if k in names})


_global_server_args: ServerArgs | None = None


def set_global_server_args(args: ServerArgs) -> None:
    global _global_server_args
    _global_server_args = args


def get_global_server_args() -> ServerArgs:
    assert _global_server_args is not None
    return _global_server_args
