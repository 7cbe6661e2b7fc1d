"""The server arguments of sglang 0.5.9-0.5.19 as the simulated node declares them.

The real names, aliases, choices and defaults, as `parser.add_argument` calls in
srt/server_args.py, where those releases declare them (and where preflight reads them). From
0.5.20 the flags are dataclass fields in srt/arg_groups/fields/ (sim/python/_dialects/).
"""

from __future__ import annotations

import argparse

from sglang.srt._sim_args import (
    ServerArgs,
    build_server_args,
    get_global_server_args,
    set_global_server_args,
)

__all__ = ["ServerArgs", "get_global_server_args", "prepare_server_args", "set_global_server_args"]

SPEC_ALGOS = ["EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM"]
LOG_LEVELS = ["debug", "info", "warning", "error", "critical"]


def add_cli_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model-path", "--model", type=str, required=True, help="The path of the model weights."
    )
    parser.add_argument("--tokenizer-path", type=str)
    parser.add_argument("--tokenizer-mode", type=str, default="auto", choices=["auto", "slow"])
    parser.add_argument("--skip-tokenizer-init", action="store_true")
    parser.add_argument("--load-format", type=str, default="auto")
    parser.add_argument("--trust-remote-code", action="store_true")
    parser.add_argument("--dtype", type=str, default="auto")
    parser.add_argument("--kv-cache-dtype", type=str, default="auto")
    parser.add_argument("--quantization", type=str)
    parser.add_argument("--context-length", type=int)
    parser.add_argument("--device", type=str, default="cuda")
    parser.add_argument("--served-model-name", type=str)
    parser.add_argument("--chat-template", type=str)
    parser.add_argument("--revision", type=str)
    parser.add_argument("--download-dir", type=str)
    parser.add_argument("--host", type=str, default="127.0.0.1")
    parser.add_argument("--port", type=int, default=30000)
    parser.add_argument("--mem-fraction-static", type=float)
    parser.add_argument("--max-running-requests", type=int)
    parser.add_argument("--max-total-tokens", type=int)
    parser.add_argument("--chunked-prefill-size", type=int)
    parser.add_argument("--max-prefill-tokens", type=int, default=16384)
    parser.add_argument("--page-size", type=int)
    parser.add_argument("--tensor-parallel-size", "--tp-size", type=int, default=1, dest="tp_size")
    parser.add_argument(
        "--pipeline-parallel-size", "--pp-size", type=int, default=1, dest="pp_size"
    )
    parser.add_argument("--data-parallel-size", "--dp-size", type=int, default=1, dest="dp_size")
    parser.add_argument(
        "--expert-parallel-size", "--ep-size", "--ep", type=int, default=1, dest="ep_size"
    )
    parser.add_argument("--base-gpu-id", type=int, default=0)
    parser.add_argument("--random-seed", type=int)
    parser.add_argument("--watchdog-timeout", type=float, default=300)
    parser.add_argument("--dist-timeout", type=int)
    parser.add_argument("--log-level", type=str, default="info", choices=LOG_LEVELS)
    parser.add_argument("--log-level-http", type=str)
    parser.add_argument("--log-requests", action="store_true")
    parser.add_argument("--api-key", type=str)
    parser.add_argument("--enable-metrics", action="store_true")
    parser.add_argument("--decode-log-interval", type=int, default=40)
    parser.add_argument("--dist-init-addr", "--nccl-init-addr", type=str)
    parser.add_argument("--nnodes", type=int, default=1)
    parser.add_argument("--node-rank", type=int, default=0)
    parser.add_argument("--attention-backend", type=str)
    parser.add_argument("--disable-cuda-graph", action="store_true")
    parser.add_argument("--cuda-graph-max-bs", type=int)
    parser.add_argument("--disable-radix-cache", action="store_true")
    parser.add_argument("--enable-torch-compile", action="store_true")
    parser.add_argument("--enable-dp-attention", action="store_true")
    parser.add_argument("--mm-enable-dp-encoder", action="store_true")
    parser.add_argument("--skip-server-warmup", action="store_true")
    parser.add_argument("--tool-call-parser", type=str)
    parser.add_argument("--reasoning-parser", type=str)
    parser.add_argument("--speculative-algorithm", type=str, choices=SPEC_ALGOS)
    parser.add_argument("--speculative-draft-model-path", "--speculative-draft-model", type=str)
    parser.add_argument("--speculative-draft-model-revision", type=str)
    parser.add_argument("--speculative-draft-load-format", type=str)
    parser.add_argument("--speculative-num-steps", type=int)
    parser.add_argument("--speculative-eagle-topk", type=int)
    parser.add_argument("--speculative-num-draft-tokens", type=int)


def prepare_server_args(argv: list[str], prog: str | None = None) -> ServerArgs:
    return build_server_args(add_cli_args, argv, prog)
