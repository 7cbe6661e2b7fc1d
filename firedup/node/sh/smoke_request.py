"""One request to the server, sent and timed ON THE NODE (stdlib only, any python >= 3.8).

usage: python -I -c THIS ENGINE BASE_URL PROMPT MAX_NEW_TOKENS TIMEOUT_S [MODEL]
Prints one JSON object: status, latency_s, body (the reply, truncated), path, model; or error.
Parsed by firedup/ops/smoke.py. Not imported by firedup: shipped as text, like firedup/node/sh/*.sh.
"""

from __future__ import annotations

import json
import sys
import time
import urllib.error
import urllib.request

engine, base, prompt = sys.argv[1], sys.argv[2], sys.argv[3]
max_new, timeout = int(sys.argv[4]), float(sys.argv[5])
model = sys.argv[6] if len(sys.argv) > 6 else ""
# A node's http_proxy must never see a request meant for the server on this very host.
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def call(method: str, path: str, payload: dict | None = None) -> tuple[int, bytes]:
    data = None if payload is None else json.dumps(payload).encode()
    headers = {"Content-Type": "application/json"}
    request = urllib.request.Request(base + path, data=data, method=method, headers=headers)
    try:
        with opener.open(request, timeout=timeout) as response:
            return int(response.status), response.read()
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read()


def served_model() -> str:
    """vLLM wants the served name; older releases require it, so ask the server."""
    try:
        status, body = call("GET", "/v1/models")
        return str(json.loads(body)["data"][0]["id"]) if status == 200 else ""
    except (ValueError, KeyError, IndexError, TypeError):
        return ""


def request() -> tuple[str, dict]:
    if engine == "sglang":
        sampling = {"max_new_tokens": max_new, "temperature": 0, "ignore_eos": True}
        return "/generate", {"text": prompt, "sampling_params": sampling}
    payload: dict = {"prompt": prompt, "max_tokens": max_new, "temperature": 0, "ignore_eos": True}
    name = model or served_model()
    if name:
        payload["model"] = name
    return "/v1/completions", payload


out: dict = {}
try:
    path, payload = request()
    out.update(path=path, model=payload.get("model", ""))
    start = time.monotonic()
    status, body = call("POST", path, payload)
    out.update(status=status, latency_s=time.monotonic() - start)
    out["body"] = body[:65536].decode("utf-8", "replace")
except Exception as exc:  # any failure is the answer: report it, never a traceback
    out["error"] = f"{type(exc).__name__}: {exc}"
print(json.dumps(out))
