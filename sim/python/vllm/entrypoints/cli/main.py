"""The `vllm` console script; `vllm serve MODEL [flags]` is simulated."""

from __future__ import annotations

import argparse
import sys

from vllm.engine_args import add_server_args


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
    serve.add_argument("model_tag", type=str, nargs="?", help="The model tag to serve")
    serve.add_argument("--model", type=str, default=None)
    add_server_args(serve)
    args = parser.parse_args(argv)
    args.model = args.model_tag or args.model or "Qwen/Qwen3-0.6B"
    from vllm.entrypoints.openai.api_server import serve as serve_api

    serve_api(args, serve)


def _version() -> str:
    from vllm.version import __version__

    return __version__


if __name__ == "__main__":
    main()
