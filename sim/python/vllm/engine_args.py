"""The flags of `vllm serve` (real names and defaults of vLLM 0.33, a useful subset)."""

from __future__ import annotations

import argparse
import json
from typing import Any


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"invalid JSON: {exc}") from None


def add_server_args(parser: argparse.ArgumentParser) -> None:
    a = parser.add_argument
    a("--host", type=str, default=None)
    a("--port", type=int, default=8000)
    a("--api-key", type=str)
    a("--served-model-name", type=str, nargs="+")
    a("--tensor-parallel-size", "-tp", type=int, default=1)
    a("--pipeline-parallel-size", "-pp", type=int, default=1)
    a("--data-parallel-size", "-dp", type=int, default=1)
    a("--max-model-len", type=int)
    a("--gpu-memory-utilization", type=float, default=0.9)
    a("--speculative-config", "-sc", type=_json)
    a("--trust-remote-code", action="store_true")
    a("--dtype", type=str, default="auto")
    a("--quantization", "-q", type=str)
    a("--kv-cache-dtype", type=str, default="auto")
    a("--max-num-seqs", type=int)
    a("--max-num-batched-tokens", type=int)
    a("--enforce-eager", action="store_true")
    a("--enable-prefix-caching", action=argparse.BooleanOptionalAction, default=None)
    a("--tokenizer", type=str)
    a("--revision", type=str)
    a("--download-dir", type=str)
    a("--seed", type=int)
    a("--enable-expert-parallel", action="store_true")
    a("--nnodes", "-n", type=int, default=1)
    a("--node-rank", "-r", type=int, default=0)
    a("--master-addr", type=str)
    a("--master-port", type=int)
    a("--uvicorn-log-level", type=str, default="info")
    a("--disable-log-requests", action="store_true")
    a("--tool-call-parser", type=str)
    a("--reasoning-parser", type=str)
    a("--enable-auto-tool-choice", action="store_true")


def non_default_args(parser: argparse.ArgumentParser, ns: argparse.Namespace) -> dict[str, Any]:
    defaults = {action.dest: action.default for action in parser._actions}
    return {k: v for k, v in vars(ns).items() if k != "func" and v != defaults.get(k)}
