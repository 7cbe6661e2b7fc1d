"""The simulated ServerArgs, shared by every dialect's parser (not a real sglang module).

Each simulated release declares its flags the way that release does, in the file where it
does (srt/server_args.py up to 0.5.19; srt/arg_groups/fields/ from 0.5.20, in
sim/python/_dialects/), so firedup's preflight reads them off the node exactly as it reads a
real install. They all land here.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass


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
    log_requests: bool = False
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


def build_server_args(
    add_cli_args: Callable[[argparse.ArgumentParser], None],
    argv: list[str],
    prog: str | None = None,
    renames: Mapping[str, str] | None = None,
) -> ServerArgs:
    """Parse with one dialect's parser (argparse's own errors, exit 2) into ServerArgs."""
    parser = argparse.ArgumentParser(prog=prog)
    add_cli_args(parser)
    values = vars(parser.parse_args(argv))
    for new, old in (renames or {}).items():
        if new in values:
            values[old] = values.pop(new)
    names = {f.name for f in dataclasses.fields(ServerArgs)}
    return ServerArgs(**{k: v for k, v in values.items() if k in names})


_global_server_args: ServerArgs | None = None


def set_global_server_args(args: ServerArgs) -> None:
    global _global_server_args
    _global_server_args = args


def get_global_server_args() -> ServerArgs:
    assert _global_server_args is not None
    return _global_server_args
