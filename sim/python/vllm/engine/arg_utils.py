"""The engine flags of vLLM 0.33 (a useful subset; real names, short forms and defaults),
declared where vLLM declares them: `EngineArgs.add_cli_args` in engine/arg_utils.py."""

from __future__ import annotations

import argparse
import json
from typing import Any


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"invalid JSON: {exc}") from None


def add_engine_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", type=str, default=None)
    parser.add_argument("--tensor-parallel-size", "-tp", type=int, default=1)
    parser.add_argument("--pipeline-parallel-size", "-pp", type=int, default=1)
    parser.add_argument("--data-parallel-size", "-dp", type=int, default=1)
    parser.add_argument("--nnodes", "-n", type=int, default=1)
    parser.add_argument("--node-rank", "-r", type=int, default=0)
    parser.add_argument("--master-addr", type=str, default="127.0.0.1")
    parser.add_argument("--master-port", type=int, default=29501)
    parser.add_argument("--max-model-len", type=int)
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.9)
    parser.add_argument("--speculative-config", "-sc", type=_json)
    parser.add_argument("--trust-remote-code", action="store_true")
    parser.add_argument("--dtype", type=str, default="auto")
    parser.add_argument("--quantization", "-q", type=str)
    parser.add_argument("--kv-cache-dtype", type=str, default="auto")
    parser.add_argument("--max-num-seqs", type=int)
    parser.add_argument("--max-num-batched-tokens", type=int)
    parser.add_argument("--enforce-eager", action="store_true")
    parser.add_argument("--enable-prefix-caching", action=argparse.BooleanOptionalAction)
    parser.add_argument("--tokenizer", type=str)
    parser.add_argument("--revision", type=str)
    parser.add_argument("--download-dir", type=str)
    parser.add_argument("--seed", type=int)
    parser.add_argument("--enable-expert-parallel", action="store_true")
    parser.add_argument("--served-model-name", type=str, nargs="+")
    parser.add_argument("--enable-log-requests", action="store_true")
