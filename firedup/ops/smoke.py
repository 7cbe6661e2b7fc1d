"""One real request to a running server, sent from the node itself: does it actually serve?

Readiness says the server is up; the smoke test asks it for `max_new_tokens` tokens and reports
the latency and tokens per second. The request is made by the node's python running a static
snippet (firedup/node/sh/smoke_request.py), so neither the port nor a proxy between the operator and
the node matters, and the latency is the server's, not the SSH link's. The reply is parsed here,
tolerantly: fields the engine does not send become None, not an error.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from functools import cache
from importlib import resources
from typing import Any

from firedup.engine import Engine
from firedup.launch.runs import RunMeta
from firedup.node.base import Node
from firedup.readiness.watch import health_url

DEFAULT_PROMPT = "The capital city of France is"
REQUEST_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class SmokeResult:
    host: str
    run_id: str
    engine: Engine
    url: str
    ok: bool
    http_status: int | None = None
    latency_s: float | None = None  # the whole request, measured on the node
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    tokens_per_s: float | None = None  # completion tokens over the whole request (prefill too)
    server_latency_s: float | None = None  # the engine's own figure, when it reports one
    accept_length: float | None = None  # speculative decoding: tokens per verify step
    text: str = ""
    error: str = ""

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "engine": self.engine.value}

    def summary(self) -> str:
        if not self.ok:
            return f"{self.host}: smoke FAILED ({self.url}): {self.error}"
        parts = [f"{self.host}: smoke ok", f"{_fmt(self.latency_s, '.3f')}s"]
        if self.completion_tokens is not None:
            parts.append(f"{self.completion_tokens} tokens")
        if self.tokens_per_s is not None:
            parts.append(f"{self.tokens_per_s:.1f} tok/s")
        if self.accept_length is not None:
            parts.append(f"accept length {self.accept_length:.2f}")
        return ", ".join(parts) + f"  {self.text[:60]!r}"


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


@cache
def _snippet() -> str:
    return (
        resources.files("firedup.node.sh").joinpath("smoke_request.py").read_text(encoding="utf-8")
    )


def base_url(run: RunMeta) -> str:
    return health_url(run).removesuffix("/health")


def smoke_argv(
    run: RunMeta, python: str, prompt: str, max_new_tokens: int, timeout_s: float, model: str
) -> list[str]:
    args = [run.engine.value, base_url(run), prompt, str(max_new_tokens), str(timeout_s)]
    return [python, "-I", "-c", _snippet(), *args, *([model] if model else [])]


def smoke(
    node: Node,
    run: RunMeta,
    *,
    max_new_tokens: int = 32,
    prompt: str = DEFAULT_PROMPT,
    python: str = "python3",
    model: str = "",
    timeout_s: float = REQUEST_TIMEOUT_S,
) -> SmokeResult:
    """Send one completion request from the node to the run's server and time it.

    A server that does not answer well is a result with `ok=False` and the reason, not an
    exception: a fleet's table shows every host. Only an unreachable node raises (ConnectError).
    `python` is the node's interpreter (HostSpec.python); `model` the served name for vLLM
    (asked from /v1/models when empty).
    """
    argv = smoke_argv(run, python, prompt, max_new_tokens, timeout_s, model)
    result = node.run(argv, timeout_s=timeout_s + 30, check=False, what="smoke request")
    if not result.ok:
        detail = (result.err or result.out).strip().splitlines()
        return _failed(run, f"{python} exited {result.exit_code}: {detail[-1] if detail else ''}")
    return parse_smoke(run, result.stdout)


def _failed(run: RunMeta, error: str, status: int | None = None) -> SmokeResult:
    return SmokeResult(
        run.host, run.run_id, run.engine, base_url(run), ok=False, http_status=status, error=error
    )


def parse_smoke(run: RunMeta, stdout: bytes) -> SmokeResult:
    """The snippet's JSON line -> a result (pure; tested on recorded replies)."""
    try:
        out = json.loads(stdout.decode("utf-8", "replace").strip().splitlines()[-1])
    except (ValueError, IndexError):
        return _failed(run, f"unreadable answer from the node: {stdout[:200]!r}")
    if not isinstance(out, dict):
        return _failed(run, f"unreadable answer from the node: {stdout[:200]!r}")
    if out.get("error"):
        return _failed(run, f"no answer from {base_url(run)}{out.get('path', '')}: {out['error']}")
    status = out.get("status")
    body = str(out.get("body", ""))
    try:
        reply: Any = json.loads(body)
    except ValueError:
        reply = None
    if status != 200 or not isinstance(reply, dict | list):
        return _failed(run, f"HTTP {status}: {_error_text(reply, body)}", status)
    latency = _number(out.get("latency_s"))
    figures = _sglang_figures(reply) if run.engine is Engine.SGLANG else _openai_figures(reply)
    return _success(run, status, latency, figures)


def _success(run: RunMeta, status: int, latency: float | None, f: dict[str, Any]) -> SmokeResult:
    tokens = f.get("completion_tokens")
    rate = tokens / latency if tokens is not None and latency else None
    return SmokeResult(
        host=run.host,
        run_id=run.run_id,
        engine=run.engine,
        url=base_url(run),
        ok=True,
        http_status=status,
        latency_s=latency,
        prompt_tokens=f.get("prompt_tokens"),
        completion_tokens=tokens,
        tokens_per_s=rate,
        server_latency_s=f.get("server_latency_s"),
        accept_length=f.get("accept_length"),
        text=str(f.get("text") or ""),
    )


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _count(value: Any) -> int | None:
    number = _number(value)
    return int(number) if number is not None else None


def _error_text(reply: Any, body: str) -> str:
    """The engine's own message: {"message"}, {"error": {"message"}}, {"detail"}, or the body."""
    if isinstance(reply, dict):
        error = reply.get("error")
        for candidate in (
            reply.get("message"),
            error.get("message") if isinstance(error, dict) else error,
            reply.get("detail"),
        ):
            if candidate:
                return str(candidate)[:300]
    return body.strip()[:300] or "empty reply"


def _sglang_figures(reply: Any) -> dict[str, Any]:
    """SGLang /generate: {"text", "meta_info": {prompt_tokens, completion_tokens, e2e_latency,
    spec_verify_ct, ...}}; a list of those when the prompt was a list."""
    first = reply[0] if isinstance(reply, list) and reply else reply
    first = first if isinstance(first, dict) else {}
    meta: dict[str, Any] = first.get("meta_info") or {}
    meta = meta if isinstance(meta, dict) else {}
    tokens = _count(meta.get("completion_tokens"))
    verify = _number(meta.get("spec_verify_ct"))
    accept = _number(meta.get("spec_accept_length"))
    if accept is None and tokens and verify:
        accept = tokens / verify
    return {
        "text": first.get("text"),
        "prompt_tokens": _count(meta.get("prompt_tokens")),
        "completion_tokens": tokens,
        "server_latency_s": _number(meta.get("e2e_latency")),
        "accept_length": accept,
    }


def _openai_figures(reply: Any) -> dict[str, Any]:
    """OpenAI-style /v1/completions (vLLM): {"choices": [{"text"}], "usage": {...}}."""
    reply = reply if isinstance(reply, dict) else {}
    usage: dict[str, Any] = reply.get("usage") or {}
    usage = usage if isinstance(usage, dict) else {}
    choices = reply.get("choices") if isinstance(reply.get("choices"), list) else []
    first = choices[0] if choices and isinstance(choices[0], dict) else {}
    return {
        "text": first.get("text"),
        "prompt_tokens": _count(usage.get("prompt_tokens")),
        "completion_tokens": _count(usage.get("completion_tokens")),
    }
