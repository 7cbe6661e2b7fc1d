"""The HTTP routes of the sglang server (answers shaped like 0.5.9's http_server.py)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import math
import os
import threading
import time
from typing import Any

from firedup_sim import clock, faults
from firedup_sim.metrics import METRICS
from firedup_sim.textgen import completion_text
from firedup_sim.uvicorn_like import AccessLoggedHandler
from sglang.srt.environ import envs
from sglang.version import __version__

logger = logging.getLogger("sglang.srt.entrypoints.http_server")
INTERNAL_STATE_TIMEOUT_S = 600.0  # sglang waits for the scheduler's answer without a bound


class GlobalState:
    """What the handlers need: args, status (Starting/Up), scheduler info, the TP0 channel."""

    def __init__(self, server_args: Any, scheduler_info: dict[str, Any], rank0_conn: Any):
        self.server_args = server_args
        self.scheduler_info = scheduler_info
        self.rank0_conn = rank0_conn
        self.lock = threading.Lock()
        self.status = "Starting"
        self.model_info: dict[str, Any] = {}
        self.hung = threading.Event()  # the hang_after_ready fault: no request is answered
        # Requests in the scheduler (one at a time: TP0's channel) and waiting for it: what
        # the real scheduler's gauges count (sglang:num_running_reqs / num_queue_reqs).
        self.running = 0
        self.queued = 0
        self.counts = threading.Lock()

    def _count(self, running: int, queued: int) -> None:
        with self.counts:
            self.running += running
            self.queued += queued

    def up(self) -> None:
        """Ready; with hang_after_ready, every request blocks from a moment later on (a
        deadlocked scheduler: the process lives, the port stays open, nothing answers)."""
        self.status = "Up"
        if faults.has("hang_after_ready"):
            delay = clock.scaled(faults.AFTER_READY_S)
            threading.Timer(delay, self.hung.set).start()

    def submit(self, req: dict[str, Any], timeout_s: float) -> dict[str, Any] | None:
        self._count(0, 1)
        with self.lock:
            self._count(1, -1)
            try:
                self.rank0_conn.send(req)
                if not self.rank0_conn.poll(timeout_s):
                    return None
                return self.rank0_conn.recv()
            finally:
                self._count(-1, 0)


STATE: GlobalState | None = None


class SglangHandler(AccessLoggedHandler):
    def reply_json(self, status: int, payload: Any) -> None:
        self.send_reply(status, json.dumps(payload).encode())

    def do_GET(self) -> None:
        self.route("GET", self.read_body())

    def do_POST(self) -> None:
        self.route("POST", self.read_body())

    def route(self, method: str, body: bytes) -> None:
        path = self.path.split("?", 1)[0]
        state = STATE
        assert state is not None
        handler = ROUTES.get((method, path))
        if state.hung.is_set():
            threading.Event().wait()  # never answers; the client times out
        if handler is None:
            self.reply_json(404, {"detail": "Not Found"})
            return
        handler(self, state, body)


def health(h: SglangHandler, state: GlobalState, body: bytes) -> None:
    if state.status != "Up":
        h.send_reply(503)
        return
    generate = h.path.startswith("/health_generate") or (
        envs.SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION.get()
    )
    if not generate:
        h.send_reply(200)
        return
    timeout_s = float(os.environ.get("SGLANG_HEALTH_CHECK_TIMEOUT", "20"))
    rid = f"HEALTH_CHECK_{time.time()}"
    tic = time.monotonic()
    reply = state.submit({"rid": rid, "input_len": 1, "max_new_tokens": 1}, timeout_s)
    if reply is not None:
        # sglang looks for the answer once a second (`await asyncio.sleep(1)`, then checks
        # last_receive_tstamp): a healthy server answers /health after one second, not sooner.
        step = clock.scaled(1.0)
        checks = max(1, math.ceil((time.monotonic() - tic) / step))
        time.sleep(max(0.0, tic + checks * step - time.monotonic()))
    if reply is None:
        logger.error(
            f"Health check failed. Server couldn't get a response from detokenizer for last "
            f"{int(timeout_s)} seconds. tic start time: {time.time() - timeout_s:.2f}. "
            f"last_heartbeat time: {time.time() - timeout_s:.2f}"
        )
        h.send_reply(503)
        return
    h.send_reply(200)


def model_info(h: SglangHandler, state: GlobalState, body: bytes) -> None:
    if h.path.startswith("/get_model_info"):
        logger.warning(
            "Endpoint '/get_model_info' is deprecated and will be removed in a future version. "
            "Please use '/model_info' instead."
        )
    h.reply_json(200, state.model_info)


def server_info(h: SglangHandler, state: GlobalState, body: bytes) -> None:
    # sglang asks the scheduler for its internal state (tokenizer_manager.get_internal_state,
    # no timeout): a scheduler that answers nothing leaves the request waiting.
    internal = state.submit({"internal_state": True}, INTERNAL_STATE_TIMEOUT_S)
    if internal is None:
        threading.Event().wait()  # never answers; the client times out
    info = dataclasses.asdict(state.server_args)
    info.update(state.scheduler_info)
    info["internal_states"] = [internal["state"]]
    info["version"] = __version__
    h.reply_json(200, info)


def list_models(h: SglangHandler, state: GlobalState, body: bytes) -> None:
    args = state.server_args
    card = {
        "id": args.served_model_name,
        "object": "model",
        "created": int(time.time()),
        "owned_by": "sglang",
        "root": args.served_model_name,
        "parent": None,
        "max_model_len": state.scheduler_info["context_len"],
    }
    h.reply_json(200, {"object": "list", "data": [card]})


def metrics(h: SglangHandler, state: GlobalState, body: bytes) -> None:
    """Prometheus text, only with --enable-metrics (as the real server mounts /metrics), under
    the real names and labels (sglang 0.5.9 metrics/collector.py, scheduler_metrics_mixin.py)."""
    args = state.server_args
    if not getattr(args, "enable_metrics", False):
        h.reply_json(404, {"detail": "Not Found"})
        return
    labels = (
        f'engine_type="unified",model_name="{args.served_model_name}",moe_ep_rank="0",'
        'pp_rank="0",tp_rank="0"'
    )
    lines = []
    for name, help_text, value in (
        ("sglang:num_running_reqs", "The number of running requests.", state.running),
        ("sglang:num_queue_reqs", "The number of requests in the waiting queue.", state.queued),
    ):
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} gauge"]
        lines.append(f"{name}{{{labels}}} {float(value)}")
    usage = min(1.0, 0.25 * (state.running + state.queued))
    lines.append(METRICS.sglang(labels, usage))  # tokens, latencies, cache, speculation
    h.send_reply(200, ("\n".join(lines) + "\n").encode(), "text/plain; version=0.0.4")


def ping(h: SglangHandler, state: GlobalState, body: bytes) -> None:
    h.send_reply(200)


def _run(state: GlobalState, prompt: str, max_new_tokens: int, warmup: bool) -> dict | None:
    req = {"input_len": max(1, len(prompt.split())), "max_new_tokens": max_new_tokens}
    if warmup:
        req["warmup"] = True
    started = time.monotonic()
    reply = state.submit(req, 600.0)
    if reply and reply.get("ok") and not warmup:
        accept = (
            float(reply.get("accept_len") or 0) if state.server_args.speculative_algorithm else 0
        )
        seconds = time.monotonic() - started
        METRICS.served(req["input_len"], int(reply["completion_tokens"]), seconds, accept)
    return reply


def _parse(body: bytes) -> dict[str, Any]:
    try:
        data = json.loads(body or b"{}")
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _error(h: SglangHandler, reply: dict | None) -> None:
    message = reply["error"] if reply else "Request timed out"
    h.reply_json(
        500,
        {
            "object": "error",
            "message": message,
            "type": "InternalServerError",
            "param": None,
            "code": 500,
        },
    )


def generate(h: SglangHandler, state: GlobalState, body: bytes) -> None:
    data = _parse(body)
    text = data.get("text", "")
    if isinstance(text, list):
        text = text[0] if text else ""
    max_new = int((data.get("sampling_params") or {}).get("max_new_tokens", 16))
    if getattr(state.server_args, "log_requests", False):  # 0.5.9 utils/request_logger.py
        sampling = data.get("sampling_params") or {}
        logger.info("Receive: obj=GenerateReqInput(text=%r, sampling_params=%r)", text, sampling)
    reply = _run(state, str(text), max_new, warmup=state.status != "Up")
    if not reply or not reply.get("ok"):
        _error(h, reply)
        return
    meta = {
        "id": hashlib.sha1(str(text).encode()).hexdigest()[:32],
        "finish_reason": {"type": "length", "length": max_new},
        "prompt_tokens": max(1, len(str(text).split())),
        "completion_tokens": reply["completion_tokens"],
        "cached_tokens": 0,
    }
    if state.server_args.speculative_algorithm:
        meta["spec_verify_ct"] = max(1, int(reply["completion_tokens"] / reply["accept_len"]))
    payload = {"text": completion_text(str(text), max_new), "meta_info": meta}
    h.reply_json(200, [payload] if isinstance(data.get("text"), list) else payload)


def _openai(h: SglangHandler, state: GlobalState, body: bytes, chat: bool) -> None:
    data = _parse(body)
    if chat:
        messages = data.get("messages") or []
        prompt = json.dumps(messages)
    else:
        prompt = str(data.get("prompt", ""))
    max_new = int(data.get("max_tokens") or data.get("max_completion_tokens") or 16)
    reply = _run(state, prompt, max_new, warmup=state.status != "Up")
    if not reply or not reply.get("ok"):
        _error(h, reply)
        return
    text = completion_text(prompt, max_new)
    usage = {"prompt_tokens": max(1, len(prompt.split())), "completion_tokens": max_new}
    usage["total_tokens"] = usage["prompt_tokens"] + max_new
    choice: dict[str, Any] = {"index": 0, "finish_reason": "length"}
    if chat:
        choice["message"] = {"role": "assistant", "content": text}
    else:
        choice["text"] = text
    h.reply_json(
        200,
        {
            "id": hashlib.sha1(prompt.encode()).hexdigest()[:32],
            "object": "chat.completion" if chat else "text_completion",
            "created": int(time.time()),
            "model": data.get("model") or state.server_args.served_model_name,
            "choices": [choice],
            "usage": usage,
        },
    )


ROUTES = {
    ("GET", "/health"): health,
    ("GET", "/health_generate"): health,
    ("GET", "/model_info"): model_info,
    ("GET", "/get_model_info"): model_info,
    ("GET", "/server_info"): server_info,
    ("GET", "/get_server_info"): server_info,
    ("GET", "/v1/models"): list_models,
    ("GET", "/ping"): ping,
    ("GET", "/metrics"): metrics,
    ("POST", "/generate"): generate,
    ("POST", "/v1/completions"): lambda h, s, b: _openai(h, s, b, chat=False),
    ("POST", "/v1/chat/completions"): lambda h, s, b: _openai(h, s, b, chat=True),
}
