"""Reading smoke replies, as the engines send them (recorded shapes), tolerantly: pure."""

from __future__ import annotations

import json
from typing import Any

import pytest

from firedup.engine import Engine
from firedup.launch.runs import RunMeta
from firedup.ops.smoke import base_url, parse_smoke, smoke_argv


def run(engine: Engine = Engine.SGLANG, bind: str = "0.0.0.0") -> RunMeta:
    return RunMeta(
        run_id="20260222T103000Z-abc123",
        host="gpu-node",
        deployment="kimi",
        engine=engine,
        port=30000,
        workdir="/srv/firedup",
        script_sha256="e" * 64,
        started_at=0.0,
        started_by="alice@laptop",
        bind=bind,
    )


def answer(status: int | None, reply: Any, latency_s: float = 0.5, **extra: Any) -> bytes:
    out: dict[str, Any] = {"path": "/generate", "model": "", **extra}
    if status is not None:
        out |= {"status": status, "latency_s": latency_s}
        out["body"] = reply if isinstance(reply, str) else json.dumps(reply)
    return (json.dumps(out) + "\n").encode()


SGLANG_059 = {  # /generate on sglang 0.5.9, plain decoding
    "text": " Paris. It is the largest city in France",
    "meta_info": {
        "id": "6f1c0b1c2f4e4a9b8d0e3c1a2b3c4d5e",
        "finish_reason": {"type": "length", "length": 32},
        "prompt_tokens": 7,
        "weight_version": "default",
        "completion_tokens": 32,
        "cached_tokens": 0,
        "e2e_latency": 0.412,
    },
}

VLLM_033 = {  # /v1/completions on vllm 0.33
    "id": "cmpl-9f0e3c1a2b3c4d5e6f708192",
    "object": "text_completion",
    "created": 1771756200,
    "model": "kimi",
    "choices": [
        {
            "index": 0,
            "text": " Paris.",
            "logprobs": None,
            "finish_reason": "length",
            "stop_reason": None,
            "prompt_logprobs": None,
        }
    ],
    "usage": {
        "prompt_tokens": 7,
        "total_tokens": 39,
        "completion_tokens": 32,
        "prompt_tokens_details": None,
    },
}


def test_sglang_reply_gives_latency_and_tokens_per_second() -> None:
    result = parse_smoke(run(), answer(200, SGLANG_059, latency_s=0.5))
    assert result.ok and result.http_status == 200
    assert (result.prompt_tokens, result.completion_tokens) == (7, 32)
    assert result.latency_s == 0.5 and result.tokens_per_s == 64.0
    assert result.server_latency_s == 0.412 and result.accept_length is None
    assert result.text.startswith(" Paris") and result.url == "http://127.0.0.1:30000"
    assert "smoke ok, 0.500s, 32 tokens, 64.0 tok/s" in result.summary()
    assert result.to_json()["engine"] == "sglang"


def test_speculative_decoding_reports_the_accept_length() -> None:
    meta = {**SGLANG_059["meta_info"], "spec_verify_ct": 10}  # type: ignore[dict-item]
    result = parse_smoke(run(), answer(200, {**SGLANG_059, "meta_info": meta}))
    assert result.accept_length == 3.2 and "accept length 3.20" in result.summary()
    explicit = {**meta, "spec_accept_length": 2.9}
    assert parse_smoke(run(), answer(200, {"meta_info": explicit})).accept_length == 2.9
    listed = parse_smoke(run(), answer(200, [{**SGLANG_059, "meta_info": meta}]))
    assert listed.completion_tokens == 32 and listed.accept_length == 3.2


def test_vllm_reply_reads_usage() -> None:
    result = parse_smoke(run(Engine.VLLM), answer(200, VLLM_033, latency_s=0.25))
    assert result.ok and result.completion_tokens == 32 and result.tokens_per_s == 128.0
    assert result.text == " Paris." and result.server_latency_s is None


def test_missing_figures_are_none_not_errors() -> None:
    for engine, reply in ((Engine.SGLANG, {"text": "x"}), (Engine.VLLM, {"choices": "?"})):
        result = parse_smoke(run(engine), answer(200, reply))
        assert result.ok and result.completion_tokens is None and result.tokens_per_s is None
        assert "smoke ok" in result.summary()


@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        (404, {"error": {"message": "The model `x` does not exist.", "code": 404}}, "does not"),
        (500, {"object": "error", "message": "Request timed out", "code": 500}, "timed out"),
        (404, {"detail": "Not Found"}, "Not Found"),
        (503, "", "empty reply"),
        (200, "<html>proxy</html>", "<html>proxy</html>"),
    ],
)
def test_an_error_reply_is_a_failed_result_with_the_engines_message(
    status: int, body: Any, expected: str
) -> None:
    result = parse_smoke(run(), answer(status, body))
    assert not result.ok and result.http_status == status
    assert expected in result.error and f"HTTP {status}" in result.error
    assert "smoke FAILED" in result.summary()


def test_no_answer_at_all() -> None:
    refused = answer(None, None, error="URLError: <urlopen error [Errno 111] Connection refused>")
    result = parse_smoke(run(), refused)
    assert not result.ok and "Connection refused" in result.error and result.http_status is None
    assert not parse_smoke(run(), b"Traceback ...").ok
    assert not parse_smoke(run(), b"").ok


def test_the_request_goes_to_the_nodes_own_address_as_argv() -> None:
    assert base_url(run(bind="10.0.0.5")) == "http://10.0.0.5:30000"
    argv = smoke_argv(run(Engine.VLLM), "/opt/py/bin/python", "it's $(rm -rf /)", 8, 30.0, "")
    assert argv[:3] == ["/opt/py/bin/python", "-I", "-c"]
    assert argv[4:] == ["vllm", "http://127.0.0.1:30000", "it's $(rm -rf /)", "8", "30.0"]
