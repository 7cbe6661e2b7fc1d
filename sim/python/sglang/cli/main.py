"""The `sglang` console script; only `sglang serve ...` is simulated."""

import argparse
import os
import sys


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="sglang")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("serve", help="Launch the SGLang server.", add_help=False)
    if not argv or argv[0] != "serve":
        parser.parse_args(argv)
        return
    from firedup_sim import events

    from sglang.srt.entrypoints.http_server import launch_server
    from sglang.srt.server_args import prepare_server_args
    from sglang.srt.utils import kill_process_tree

    server_args = prepare_server_args(argv[1:], prog="sglang serve")
    try:
        launch_server(server_args)
    except BaseException:
        events.record("crashed")
        raise
    finally:
        kill_process_tree(os.getpid(), include_parent=False)


if __name__ == "__main__":
    main()
