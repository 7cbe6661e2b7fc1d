"""The OpenAI-compatible routes of the vLLM stand-in."""

from __future__ import annotations

import hashlib
import json
import threading
import time
from typing import Any

from firedup_sim import clock, faults
from firedup_sim.metrics import METRICS
from firedup_sim.textgen import completion_text
from firedup_sim.uvicorn_like import AccessLoggedHandler

from vllm.version import __version__

ROUTE_LIST = [
    ("/openapi.json", "GET, HEAD"),
    ("/docs", "GET, HEAD"),
    ("/health", "GET"),
    ("/load", "GET"),
    ("/ping", "GET, POST"),
    ("/version", "GET"),
    ("/v1/models", "GET"),
    ("/v1/chat/completions", "POST"),
    ("/v1/completions", "POST"),
    ("/metrics", "GET"),
]


class EngineClient:
    def __init__(self, args: Any, conn: Any, engine_proc: Any) -> None:
        self.args = args
        self.conn = conn
        self.engine_proc = engine_proc
        self.lock = threading.Lock()
        self.dead = False

    def check_health(self) -> bool:
        return not self.dead and self.engine_proc.is_alive()

    def generate(self, max_new_tokens: int) -> dict[str, Any] | None:
        with self.lock:
            if not self.check_health():
                return None
            self.conn.send({"max_new_tokens": max_new_tokens})
            if not self.conn.poll(600):
                return None
            return self.conn.recv()


CLIENT: EngineClient | None = None


HUNG = threading.Event()  # the hang_after_ready fault


def hang_later() -> None:
    """With hang_after_ready, no request is answered from a moment after ready on (a stuck
    engine loop: the processes live, the port stays open, nothing answers)."""
    if faults.has("hang_after_ready"):
        threading.Timer(clock.scaled(faults.AFTER_READY_S), HUNG.set).start()


class VllmHandler(AccessLoggedHandler):
    def reply_json(self, status: int, payload: Any) -> None:
        self.send_reply(status, json.dumps(payload).encode())

    def do_GET(self) -> None:
        self.read_body()
        self._route("GET", b"")

    def do_POST(self) -> None:
        self._route("POST", self.read_body())

    def _route(self, method: str, body: bytes) -> None:
        client = CLIENT
        assert client is not None
        if HUNG.is_set():
            threading.Event().wait()  # hang_after_ready: never answers; the client times out
        path = self.path.split("?", 1)[0]
        if (path == "/health" and method == "GET") or path == "/ping":
            self.send_reply(200 if client.check_health() else 503)
        elif path == "/version":
            self.reply_json(200, {"version": __version__})
        elif path == "/load":
            self.reply_json(200, {"server_load": 0})
        elif path == "/metrics":
            name = client.args.served_model_name_resolved
            text = METRICS.vllm(name, METRICS.kv_usage()).encode()
            self.send_reply(200, text, "text/plain; version=0.0.4; charset=utf-8")
        elif path == "/v1/models":
            self.reply_json(200, self._models(client))
        elif path in ("/v1/completions", "/v1/chat/completions") and method == "POST":
            self._complete(client, body, chat=path.endswith("chat/completions"))
        else:
            self.reply_json(404, {"detail": "Not Found"})

    def _models(self, client: EngineClient) -> dict[str, Any]:
        name = client.args.served_model_name_resolved
        card = {
            "id": name,
            "object": "model",
            "created": int(time.time()),
            "owned_by": "vllm",
            "root": client.args.model,
            "parent": None,
            "max_model_len": client.args.max_model_len_resolved,
        }
        return {"object": "list", "data": [card]}

    def _complete(self, client: EngineClient, body: bytes, chat: bool) -> None:
        try:
            data = json.loads(body or b"{}")
        except ValueError:
            data = {}
        prompt = json.dumps(data.get("messages")) if chat else str(data.get("prompt", ""))
        max_new = int(data.get("max_tokens") or data.get("max_completion_tokens") or 16)
        started = time.monotonic()
        with METRICS.request():
            reply = client.generate(max_new)
        if reply is None:
            self.reply_json(
                500,
                {
                    "error": {
                        "message": "EngineCore encountered an issue. See stack trace (above) "
                        "for the root cause.",
                        "type": "InternalServerError",
                        "code": 500,
                    }
                },
            )
            return
        text = completion_text(prompt, max_new)
        choice: dict[str, Any] = {"index": 0, "finish_reason": "length"}
        if chat:
            choice["message"] = {"role": "assistant", "content": text}
        else:
            choice["text"] = text
        prompt_tokens = max(1, len(prompt.split()))
        METRICS.served(prompt_tokens, max_new, time.monotonic() - started)
        self.reply_json(
            200,
            {
                "id": "cmpl-" + hashlib.sha1(prompt.encode()).hexdigest()[:24],
                "object": "chat.completion" if chat else "text_completion",
                "created": int(time.time()),
                "model": data.get("model") or client.args.served_model_name_resolved,
                "choices": [choice],
                "usage": {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": max_new,
                    "total_tokens": prompt_tokens + max_new,
                },
            },
        )
