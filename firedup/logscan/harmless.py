"""Lines that look alarming or busy but tell nothing bad: harmless warnings, serving traffic.

Scary-looking lines that are part of healthy startups (issue 4 §3) are checked first and can
never fail a run. Serving traffic and NCCL chatter, the bulk of a long log, skip the signature
table (the costly part of reading a line); requests answered show a server that was ready.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from firedup.logscan.signatures import match_signature

# Scary-looking lines that are part of healthy startups (issue 4 §3). They are checked first
# and can never fail a run, whatever else they contain.
HARMLESS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (needle, re.compile(pattern, re.IGNORECASE))
    for needle, pattern in (
        ("custom allreduce", r"setup custom allreduce failed"),
        ("ignore import error", r"ignore import error"),
        ("warning", r"(?:deprecation|future|user|runtime|resource)warning:"),
        ("deprecated", r"\bdeprecated\b"),
        ("nccl info", r"\bnccl info\b"),
        ("nccl warn", r"\bnccl warn\b"),
        ("resource_tracker", r"resource_tracker"),
        ("[w", r"^\[w(?:\d{4} [\d:.]+)?[^\]]*\]"),  # glog warnings from torch c10d
        ("exception ignored in", r"^exception ignored in"),
    )
)

# The bulk of a long log: serving traffic and NCCL chatter. Never a failure signature, so the
# signature table (the costly part of reading a line) is skipped for them.
ROUTINE = (
    "Decode batch",
    "Prefill batch",
    "127.0.0.1:",
    'GET /health HTTP/1.1"',
    "Avg prompt throughput",
    "Engine 000: Avg prompt throughput",
)

# A server answering requests: a log that starts here shows a server that was ready.
# Metadata endpoints (`/v1/models`, `/metrics`, `/health` answered 503...) are served by the
# HTTP side alone, before the engine is ready: they prove nothing.
# Also a request's own log line (SGLang's `--log-requests`: `Receive: obj=GenerateReqInput(`,
# tokenizer_manager.py), a batch line behind a rank tag left on it (`[TP0] Decode batch`), an
# access line shortened without its protocol (`"POST /v1/chat/completions" 200 OK`), and a KV
# cache connector moving a request's tokens (LMCache: `Retrieved 0 out of 256 required
# tokens`, `Reqid: chatcmpl-..`, `Stored/updated 1 chunks`, `Store skips 0 tokens`), and
# wrappers' re-logged request lines (below).
# SGLang up to 0.1.x logged a batch as `new fill batch. #seq: 1. #cached_token: ...`
# (router/model_rpc.py), later ones behind a GPU tag (`[gpu_id=0] Decode batch.`).
# A request's constrained decoding jumping forward (SGLang 0.2-0.3 schedule_batch.py
# `jump_forward_and_retokenize`: `Token fusion between input and output, ...`), and the body
# of SGLang's `/generate` answer pasted with the log (`{"text": ..., "meta_info": {...`).
SERVING = re.compile(
    r'"(?:GET|POST|PUT|DELETE|HEAD|OPTIONS) /(?!(?:v1/)?models\b|metrics\b|version\b|ping\b'
    r"|docs\b|openapi\.json|(?:get_)?model_info\b|(?:get_)?server_info\b)\S*(?: HTTP/[\d.]+)?"
    r'" [234]\d\d'
    r"|^(?:\[(?:TP\d+|gpu(?:_id)?=\d+)\] )?(?:Decode|Prefill) batch\b|Avg prompt throughput"
    r"|new fill batch\. #seq: \d"  # its words alone: behind any tag a one-line paste kept
    r"|^Exception in ASGI application|^Receive: obj=\w*ReqInput\("
    r"|^(?:Token fusion between input and output|Encoded all_text resulted in empty all_ids"
    r"|prompt_tokens is larger than encoded all_ids)"
    r'|^\{"text": ?"(?:[^"\\]|\\.)*", ?"meta_info": ?\{'
    r"|^\[shutdown\] API server: "  # vLLM's serving HTTP server being stopped
    r"|LMCache(?: \w+)?: ?(?:Retrieved \d+ out of \d+ required tokens|Reqid: \S"
    r"|Stored/updated \d+ chunks|Store skips \d+ tokens)"
    # Triton's vLLM backend answering one request with an error (model.py's `generate`).
    r"|\[vllm\] Error generating stream: "
    # vLLM's request log behind another program's logging format, which puts its own stamp,
    # vLLM's logger name and the level first (`2024-07-31 16:07:33,561 vllm.engine.async_llm_
    # engine 2683080 INFO     Added request 1f0e.`: a serving framework's worker log).
    r"|\s(?:INFO|DEBUG):?\s+(?:Added|Finished|Aborted) request(?:\(s\))? \S+$"
)


# Proof that the engine itself serves requests, whatever the log kept of its startup (vLLM's
# API server accepts requests only once its engine is up): its stats (logged at INFO only when
# tokens went through, from a loop the HTTP app starts; V0's API server forces one every 10 s), its
# request log (`Received request chatcmpl-1: ...`, `Added request ...`), an error its request
# handlers logged (`ERROR ... [serving_chat.py:257]`), a traceback through one (`in
# create_chat_completion`).
_REQUEST_LOG = (
    "Received request ",
    "Added request ",
    "Aborted request",
    "Generated response ",
    "SpecDecoding metrics: ",  # drafts accepted: requests ran
    # vllm-omni's orchestrator, once a request went through every stage (pformat of its
    # record, entrypoints/log_utils.py OrchestratorMetrics).
    "{'type': 'request_level_metrics'",
    '{"type": "request_level_metrics"',
)
_HANDLER_LOG = re.compile(r"[\[ ]serving(?:_\w+)?\.py:\d+\]")
_HANDLERS = (
    r"(?:create_(?:chat_completion|completion|embedding|pooling|score|rerank|transcription"
    r"|translation|responses?|messages)|(?:chat_)?completion_(?:stream|full)_generator|do_rerank)"
)
# A frame `, in create_completion` (or that word alone: a wrap's tail), or the route's code
# calling the handler (`generator = await handler.create_completion(request, raw_request)`).
_HANDLER_FRAME = re.compile(rf"(?:^|\s){_HANDLERS}\s*$|\.{_HANDLERS}\(")


def serves_requests(text: str, message: str, level: str) -> bool:
    """Whether a vLLM line shows a request being served: the engine is up and its HTTP side
    too (`text` is the line with the engine's prefix, `message` without). A handler's line
    that reports the engine dead (a strong signature) is that failure, not a proof."""
    if "Avg prompt throughput" in message:  # its stats (vllm/v1/metrics/loggers.py): see above
        return True
    if message.startswith(_REQUEST_LOG):
        return True
    if level != "ERROR" or not handler_log(text):
        return False
    fatal = match_signature(message)
    return fatal is None or not fatal.strong


def handler_log(text: str) -> bool:
    """Whether a line was logged by one of vLLM's request handlers (`[serving_chat.py:257]`,
    a fork's `[serving.py:1386]`): what it reports happened to a request being served."""
    return "serving" in text and _HANDLER_LOG.search(text) is not None


def handler_frame(frame: str) -> bool:
    """Whether a traceback's frame line (joined when it was wrapped, or its wrapped tail)
    runs in one of vLLM's request handlers: a request was being served."""
    return ("create_" in frame or "_generator" in frame or "rerank" in frame) and (
        _HANDLER_FRAME.search(frame) is not None
    )


# uvicorn runs each HTTP request's ASGI app in `RequestResponseCycle.run_asgi`
# (uvicorn/protocols/http/h11_impl.py and httptools_impl.py): a frame there is a request's.
_ASGI_FRAME = re.compile(r"(?:^|[\s,])in run_asgi\s*$")


def asgi_frame(frame: str) -> bool:
    """Whether a traceback's frame line runs in uvicorn's per-request coroutine: the HTTP
    server was serving a request (any engine's; SGLang's own warm-up request too)."""
    return "run_asgi" in frame and _ASGI_FRAME.search(frame) is not None


# SGLang's OpenAI routes (`openai_v1_chat_completions` in srt/server.py or http_server.py,
# calling `v1_chat_completions` in srt/openai_api/adapter.py): its warm-up posts to /generate.
# A frame in one, or the route's code line calling the adapter (a wrap may cut the frame).
# A streaming response's body generator, `stream_results` by convention (vLLM's
# entrypoints/api_server.py, Xinference's api/restful_api.py), runs only for a request too.
# From 0.4.8 the routes call the OpenAI serving classes (srt/entrypoints/openai/serving_*.py),
# whose `handle_request` logs `Error in request: ...` with the traceback: a frame there by its
# file in the request's flow (handling, validating, converting, building the response or the
# stream, processing its parts; not `__init__`, built at startup), or the base's code line
# calling the request's half (`self._handle_streaming_request(`).
_SGLANG_ROUTE = re.compile(
    r"(?:^|[\s,])in (?:(?:openai_)?v1_(?:chat_)?(?:completions|embeddings)|stream_results)\s*$"
    r"|\bawait v1_(?:chat_)?(?:completions|embeddings)\("
    r'|/openai/serving_\w+\.py", line \d+, in (?:handle_request|_handle_\w+|_validate_request'
    r"|_convert_to_internal_request|_build_\w+_response|_generate_\w+_stream|_process_\w+)\s*$"
    r"|\bawait self\._handle_(?:non_)?streaming_request\("
)


# Applying a chat template to a request's messages: vLLM's `apply_hf_chat_template` /
# `apply_mistral_chat_template` (entrypoints/chat_utils.py) and `safe_apply_chat_template`
# (renderers/), SGLang's `_apply_jinja_template` (entrypoints/openai/serving_chat.py). vLLM's
# helper logs its traceback itself ("An error occurred in `transformers` while applying chat
# template") and raises a ValueError its caller always catches: the request's handler answers
# 400, and the start-up warm-up of newer releases logs "Chat template warmup failed" and starts
# on. So the frame is a request's when requests served count (the warm-up runs before the
# HTTP side is up, in a log that kept its startup).
_TEMPLATE_FRAME = re.compile(
    r"(?:^|[\s,])in (?:apply_(?:hf|mistral)_chat_template|safe_apply_chat_template"
    r"|_apply_jinja_template)\s*$"
)


def request_frame(frame: str, *, sglang: bool, serving_counts: Callable[[], bool]) -> bool:
    """Whether a frame shows a request being served: uvicorn's per-request coroutine, SGLang's
    OpenAI route or a chat template applied when requests served count (any engine; an SGLang
    log whose startup it kept never counts them, for its warm-up), or one of vLLM's handlers."""
    routed = (
        asgi_frame(frame)
        or (
            (
                "v1_" in frame
                or "stream_results" in frame
                or "_request" in frame
                or "serving_" in frame
            )
            and _SGLANG_ROUTE.search(frame) is not None
        )
        or ("_template" in frame and _TEMPLATE_FRAME.search(frame) is not None)
    )
    if routed and serving_counts():
        return True
    return not sglang and handler_frame(frame)


def is_routine(message: str) -> bool:
    """Serving traffic and NCCL chatter: never a failure, so never matched against the table."""
    return message.startswith(ROUTINE) or ' HTTP/1.1" ' in message or "NCCL INFO " in message


def harmless_across(tail: str, message: str) -> bool:
    """Whether a line and the end of the long one before it, read joined (cut mid-word, or at
    a space the paste lost), make a harmless line whose words straddle the cut: the line is
    the rest of a hard-wrapped harmless one (`... NCCL WA` then `RN Call to bind failed`)."""
    cut = len(tail)
    for glue in ("", " "):
        text = tail + glue + message[:200]
        lower = text.lower()
        for needle, pattern in HARMLESS:
            if needle in lower:
                found = pattern.search(text)
                if found is not None and found.start() < cut < found.end():
                    return True
    return False


def is_harmless(message: str) -> bool:
    lower = message.lower()
    return any(needle in lower and pattern.search(message) for needle, pattern in HARMLESS)
