"""The server arguments of sglang >= 0.5.20 as the simulated node declares them.

Most flags are annotated fields of the classes in srt/arg_groups/fields/, derived by
arg_utils; a few are still `parser.add_argument` calls here, as in the real release.
`--cuda-graph-max-bs` is gone (0.5.14-0.5.19 kept it as an alias of
`--cuda-graph-max-bs-decode`), so argparse calls it ambiguous, as the real 0.5.23 does.
"""

from __future__ import annotations

import argparse

from sglang.srt._sim_args import (
    ServerArgs,
    build_server_args,
    get_global_server_args,
    set_global_server_args,
)
from sglang.srt.arg_groups.arg_utils import add_cli_args_from_dataclass
from sglang.srt.arg_groups.fields import INPUT_FIELD_SOURCES

__all__ = ["ServerArgs", "get_global_server_args", "prepare_server_args", "set_global_server_args"]

# The simulated engine captures decode graphs only: the decode bound is its one bound.
RENAMES = {"cuda_graph_max_bs_decode": "cuda_graph_max_bs"}


def add_cli_args(parser: argparse.ArgumentParser) -> None:
    for cls in INPUT_FIELD_SOURCES:
        add_cli_args_from_dataclass(parser, cls)
    parser.add_argument("--disable-cuda-graph", action="store_true", help="Disable cuda graph.")
    parser.add_argument("--enable-dp-attention", action="store_true")
    parser.add_argument("--tool-call-parser", type=str, default=None)
    parser.add_argument("--reasoning-parser", type=str, default=None)


def prepare_server_args(argv: list[str], prog: str | None = None) -> ServerArgs:
    args = build_server_args(add_cli_args, argv, prog, RENAMES)
    if not args.model_path:
        argparse.ArgumentParser(prog=prog).error(
            "the following arguments are required: --model-path/--model"
        )
    return args
