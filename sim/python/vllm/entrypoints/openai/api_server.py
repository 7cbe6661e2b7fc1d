"""The vLLM API server: binds the port first, starts the engine core, listens when ready."""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import signal
import sys
import threading
import time
from typing import Any

from firedup_sim import events, modelinfo, proctree, uvicorn_like

from vllm import logger as vlogger
from vllm.config.model import verify_max_model_len
from vllm.entrypoints.common.cli_args import make_arg_parser, non_default_args
from vllm.entrypoints.openai import routes
from vllm.v1.engine.core import run_engine_core
from vllm.version import __version__

api_log = vlogger.SourceLogger("api_server.py")
utils_log = vlogger.SourceLogger("utils.py")
model_log = vlogger.SourceLogger("model.py")
entry_log = vlogger.SourceLogger("entry.py")
launcher_log = vlogger.SourceLogger("launcher.py")
client_log = vlogger.SourceLogger("core_client.py")


def resolve_model(args: argparse.Namespace) -> None:
    info = modelinfo.load(args.model)
    model_log.info(547, f"Resolved architecture: {info.architecture}")
    args.max_model_len_resolved = verify_max_model_len(
        info.config, args.model, args.max_model_len, {"model": args.model, **vars(args)}
    )
    model_log.info(1510, f"Using max model len {args.max_model_len_resolved}")
    names = args.served_model_name or [args.model]
    args.served_model_name_resolved = names[0]


def wait_for_engine(conn: Any, proc: Any) -> None:
    timeout_s = float(os.environ.get("VLLM_ENGINE_READY_TIMEOUT_S", "600"))
    waited = 0.0
    while waited < timeout_s:
        if conn.poll(0.1):
            try:
                msg = conn.recv()
            except EOFError:
                msg = {"status": "failed"}
            if msg["status"] == "ready":
                return
            break
        waited += 0.1
        if not proc.is_alive():
            break
    else:
        raise TimeoutError(
            "Timed out waiting for engine core processes to start. This is often caused by slow "
            f"weight loading for large models. Waited {int(timeout_s)} seconds (configured by "
            "VLLM_ENGINE_READY_TIMEOUT_S). To increase the timeout, set the environment "
            "variable: VLLM_ENGINE_READY_TIMEOUT_S=<seconds>"
        )
    proc.join(5)
    raise RuntimeError(
        "Engine core initialization failed. See root cause above. "
        f"Failed core proc(s): {{'EngineCore_DP0': {proc.exitcode}}}"
    )


def run_server(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    vlogger.configure("APIServer")
    uvicorn_like.setup_loggers(vlogger.uvicorn_format(), vlogger.DATEFMT)
    api_log.info(1912, f"vLLM server version {__version__}, serving model {args.model}")
    utils_log.info(253, f"non-default args: {non_default_args(parser, args)}")
    resolve_model(args)
    host = args.host or "0.0.0.0"
    server = uvicorn_like.Server(host, args.port, routes.VllmHandler)
    server.bind_only()  # before the engine starts (vllm #8204): a busy port fails right here
    ctx = mp.get_context("fork")
    server_up = ctx.Event()
    conn, child_conn = ctx.Pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    # Not a daemon: the engine core has worker children of its own.
    engine = ctx.Process(target=run_engine_core, args=(args, child_conn, server_up))
    engine.start()
    wait_for_engine(conn, engine)
    routes.CLIENT = client = routes.EngineClient(args, conn, engine)
    _serve(args, server, host, client, server_up)


def _serve(args: Any, server: Any, host: str, client: Any, server_up: Any) -> None:
    api_log.info(1550, "Supported tasks: ['generate']")
    entry_log.info(52, f"Starting vLLM server on http://{host}:{args.port}")
    launcher_log.info(37, "Available routes are:")
    for path, methods in routes.ROUTE_LIST:
        launcher_log.info(45, f"Route: {path}, Methods: {methods}")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda s, f: stop.set())
    signal.signal(signal.SIGINT, lambda s, f: stop.set())
    log = uvicorn_like.error_log
    log.info(f"Started server process [{os.getpid()}]")
    log.info("Waiting for application startup.")
    log.info("Application startup complete.")
    server.listen()  # uvicorn serves the pre-bound socket: no "Uvicorn running on" line
    uvicorn_like.serve_in_thread(server)
    events.record("ready")
    server_up.set()
    routes.hang_later()
    while not stop.wait(0.2):
        if not client.engine_proc.is_alive():
            client.dead = True
            client_log.error(
                693, "Engine core proc EngineCore_DP0 died unexpectedly, shutting down client."
            )
            events.record("crashed")
            break
    log.info("Shutting down")
    server.shutdown()
    log.info("Waiting for application shutdown.")
    log.info("Application shutdown complete.")
    log.info(f"Finished server process [{os.getpid()}]")


def main(argv: list[str] | None = None) -> None:
    parser = make_arg_parser(argparse.ArgumentParser(prog="api_server.py"))
    args = parser.parse_args(argv)
    # The module always starts a full API server, --headless or not (vLLM 0.33
    # launchers/api_server/entry.py): only `vllm serve --headless` runs workers alone.
    args.model = args.model_tag or args.model or "facebook/opt-125m"
    serve(args, parser)


def serve(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    try:
        run_server(args, parser)
    except BaseException:
        events.record("crashed")
        # The real API server takes seconds to tear its engine processes down after the
        # fatal lines (FIREDUP_SIM_EXIT_DELAY_S; docs/simulated-node.md).
        time.sleep(float(os.environ.get("FIREDUP_SIM_EXIT_DELAY_S") or 0))
        raise
    finally:
        proctree.kill_descendants(os.getpid())


if __name__ == "__main__":
    import warnings

    warnings.warn(  # as vLLM 0.29-0.33 print it (entrypoints/openai/api_server.py:50)
        "The `python -m vllm.entrypoints.openai.api_server` command is deprecated "
        "and may be removed in a future release. Please use `vllm server` instead.",
        DeprecationWarning,
        stacklevel=1,
    )
    main()
