"""launch_server: schedulers first, then the HTTP server (uvicorn), then the warmup request."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import signal
import sys
import threading
import urllib.request
from typing import Any

from firedup_sim import clock, events, modelinfo, uvicorn_like
from sglang.srt.entrypoints import http_api
from sglang.srt.entrypoints.engine import _launch_subprocesses
from sglang.srt.server_args import set_global_server_args
from sglang.srt.utils import configure_logger, get_exception_traceback, kill_process_tree
from sglang.version import __version_tuple__

logger = logging.getLogger(__name__)


def _check_model_path(path: str) -> None:
    if (os.path.isabs(path) or path.startswith(".")) and not os.path.isdir(path):
        raise OSError(
            f"Incorrect path_or_model_id: '{path}'. Please provide either the path to a "
            "local folder or the repo_id of a model on the Hub."
        )
    modelinfo.load(path)


def _model_info(server_args: Any) -> dict[str, Any]:
    info = modelinfo.load(server_args.model_path)
    return {
        "model_path": server_args.model_path,
        "tokenizer_path": server_args.tokenizer_path,
        "is_generation": True,
        "preferred_sampling_params": None,
        "weight_version": "default",
        "has_image_understanding": info.has_vision,
        "has_audio_understanding": False,
        "model_type": info.model_type,
        "architectures": [info.architecture],
    }


def running_phase_sigquit_handler(signum: Any = None, frame: Any = None) -> None:
    logger.error(f"SIGQUIT received. {signum=}, {frame=}. It usually means one child failed.")
    events.record("crashed")
    kill_process_tree(os.getpid())


def launch_server(server_args: Any) -> None:
    configure_logger(server_args)
    set_global_server_args(server_args)
    if __version_tuple__ >= (0, 5, 19):  # the resolved fields as a dict from 0.5.19
        logger.info(f"server_args={dataclasses.asdict(server_args)}")
    else:
        logger.info(f"{server_args=}")
    _check_model_path(server_args.model_path)
    if server_args.speculative_draft_model_path:
        _check_model_path(server_args.speculative_draft_model_path)

    subprocs = _launch_subprocesses(server_args)
    if server_args.node_rank >= 1:
        _serve_dummy_health(server_args, subprocs)
        return

    http_api.STATE = state = http_api.GlobalState(
        server_args, subprocs.scheduler_infos[0], subprocs.rank0_conn
    )
    state.model_info = _model_info(server_args)
    uvicorn_like.setup_loggers("[%(asctime)s] %(levelprefix)s %(message)s", "%Y-%m-%d %H:%M:%S")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda s, f: stop.set())
    signal.signal(signal.SIGINT, lambda s, f: stop.set())

    log = uvicorn_like.error_log
    log.info(f"Started server process [{os.getpid()}]")
    log.info("Waiting for application startup.")
    signal.signal(signal.SIGQUIT, running_phase_sigquit_handler)
    warmup = threading.Thread(
        target=_wait_and_warmup, args=(server_args, state, subprocs), daemon=True
    )
    warmup.start()
    log.info("Application startup complete.")
    server = uvicorn_like.Server(server_args.host, server_args.port, http_api.SglangHandler)
    try:
        server.bind_only()
        server.listen()
    except OSError as exc:
        log.error(uvicorn_like.bind_error_message(server_args.host, server_args.port, exc))
        log.info("Waiting for application shutdown.")
        log.info("Application shutdown complete.")
        sys.exit(1)
    log.info(
        f"Uvicorn running on http://{server_args.host}:{server_args.port} (Press CTRL+C to quit)"
    )
    uvicorn_like.serve_in_thread(server)
    while not stop.wait(1.0):
        pass
    log.info("Shutting down")
    server.shutdown()
    log.info("Waiting for application shutdown.")
    log.info("Application shutdown complete.")
    log.info(f"Finished server process [{os.getpid()}]")


def _execute_server_warmup(server_args: Any, state: http_api.GlobalState) -> bool:
    url = f"http://{server_args.host}:{server_args.port}"
    if server_args.host in ("0.0.0.0", "::"):
        url = f"http://127.0.0.1:{server_args.port}"
    headers = {"Content-Type": "application/json"}
    if server_args.api_key:
        headers["Authorization"] = f"Bearer {server_args.api_key}"
    last_traceback = ""
    info = None
    for _ in range(120):
        clock.sleep(0.25)
        try:
            with urllib.request.urlopen(url + "/model_info", timeout=5) as res:
                info = json.loads(res.read())
            break
        except OSError:
            last_traceback = get_exception_traceback()
    if info is None:
        logger.error(f"Initialization failed. warmup error: {last_traceback}")
        kill_process_tree(os.getpid())
        return False
    if info["has_image_understanding"] and not server_args.skip_tokenizer_init:
        request_name = "/v1/chat/completions"
        payload: dict[str, Any] = {
            "model": server_args.served_model_name,
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "Describe this image in a very short sentence."},
                        {
                            "type": "image_url",
                            "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="},
                        },
                    ],
                }
            ],
            "max_tokens": 8,
            "temperature": 0,
        }
    else:
        request_name = "/generate"
        payload = {
            "text": "The capital city of France is",
            "sampling_params": {"temperature": 0, "max_new_tokens": 8},
        }
    try:
        req = urllib.request.Request(
            url + request_name, json.dumps(payload).encode(), headers, method="POST"
        )
        try:
            with urllib.request.urlopen(req, timeout=600) as res:
                status, text = res.status, res.read().decode()
        except urllib.error.HTTPError as err:
            status, text = err.code, err.read().decode()
        assert status == 200, f"{text}"
        state.up()
    except Exception:
        last_traceback = get_exception_traceback()
        logger.error(f"Initialization failed. warmup error: {last_traceback}")
        events.record("crashed")
        kill_process_tree(os.getpid())
        return False
    return True


def _wait_and_warmup(server_args: Any, state: http_api.GlobalState, subprocs: Any) -> None:
    if not server_args.skip_server_warmup:
        if not _execute_server_warmup(server_args, state):
            return
    else:
        state.up()
    logger.info("The server is fired up and ready to roll!")
    events.record("ready")
    subprocs.server_up.set()


def _serve_dummy_health(server_args: Any, subprocs: Any) -> None:
    """Nodes with --node-rank >= 1: /health, /health_generate and /ping always 200."""
    uvicorn_like.setup_loggers(
        "[%(asctime)s] %(levelprefix)s %(message)s", "%Y-%m-%d %H:%M:%S", access_log=False
    )
    uvicorn_like.error_log.setLevel(logging.WARNING)

    class DummyHandler(uvicorn_like.AccessLoggedHandler):
        def do_GET(self) -> None:
            ok = self.path.split("?")[0] in ("/health", "/health_generate", "/ping")
            self.send_reply(200 if ok else 404)

    server = uvicorn_like.Server(server_args.host, server_args.port, DummyHandler)
    server.bind_only()
    server.listen()
    uvicorn_like.serve_in_thread(server)
    for proc in subprocs.scheduler_procs:
        proc.join()
        logger.error(
            f"Scheduler or DataParallelController {proc.pid} terminated with {proc.exitcode}"
        )
        events.record("crashed")
        kill_process_tree(os.getpid())
