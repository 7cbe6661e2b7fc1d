"""The `vllm` console script; `vllm serve MODEL [flags]` is simulated, `--headless` included."""

from __future__ import annotations

import argparse
import sys

from vllm.entrypoints.common.cli_args import make_arg_parser


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="vllm", description="vLLM CLI")
    parser.add_argument("-v", "--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="subparser", required=True)
    serve = sub.add_parser(
        "serve",
        usage="vllm serve [model_tag] [options]",
        help="Launch a local OpenAI-compatible API server to serve LLM",
    )
    make_arg_parser(serve)
    args = parser.parse_args(argv)
    args.model = args.model_tag or args.model or "Qwen/Qwen3-0.6B"
    if args.headless:  # cli/serve.py: ranks > 0 of a multi-node launch run workers only
        from vllm.entrypoints.cli.serve import run_headless

        run_headless(args)
        return
    from vllm.entrypoints.openai.api_server import serve as serve_api

    serve_api(args, serve)


def _version() -> str:
    from vllm.version import __version__

    return __version__


if __name__ == "__main__":
    main()
