"""The serving flags of vLLM 0.33 (subset), declared where vLLM declares them:
entrypoints/common/cli_args.py (`make_arg_parser`, `FrontendArgs`)."""

from __future__ import annotations

import argparse
from typing import Any

from vllm.engine.arg_utils import add_engine_args


def add_frontend_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", type=str, default=None)
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--api-key", type=str)
    parser.add_argument("--uvicorn-log-level", type=str, default="info")
    parser.add_argument("--tool-call-parser", type=str)
    parser.add_argument("--reasoning-parser", type=str)
    parser.add_argument("--enable-auto-tool-choice", action="store_true")


def make_arg_parser(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """`vllm serve` and the api_server module share this parser, --headless included (only
    `vllm serve` acts on it: the module always starts a full API server)."""
    parser.add_argument("model_tag", type=str, nargs="?", help="The model tag to serve")
    parser.add_argument("--headless", action="store_true", default=False)
    parser.add_argument("--api-server-count", "-asc", type=int, default=None)
    add_frontend_args(parser)
    add_engine_args(parser)
    return parser


def non_default_args(parser: argparse.ArgumentParser, ns: argparse.Namespace) -> dict[str, Any]:
    defaults = {action.dest: action.default for action in parser._actions}
    return {k: v for k, v in vars(ns).items() if k != "func" and v != defaults.get(k)}
