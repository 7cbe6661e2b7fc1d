"""Round eight (the sixth blind part's misses, logs from projects downstream of vLLM/SGLang):
a request's chat-template error, serving evidence a wrapper re-logs, causes named by where a
cut traceback ran or by a wrapper's own failure lines, a death said in another language.

Each rule also has a crafted fixture pair under tests/fixtures/logs (named in the section);
these tests pin the rule on the smallest input, including the ways it must not fire.
"""

from __future__ import annotations

import pytest

from firedup.logscan import Phase, Reason, Verdict, explain
from firedup.logscan.harmless import request_frame


def _read(log: bytes) -> tuple[Verdict, Phase, Reason | None]:
    state = explain(log)
    return state.verdict, state.phase, state.reason


# -- a chat template's error is a request's (field/vllm_mistral_template_error_mid_serving,
# vllm/template_warmup_failure_during_startup) ----------------------------------------------

_HELPER = "(APIServer pid=9) ERROR 10-01 08:00:00 [chat_utils.py:1400] "
_TEMPLATE_TRACEBACK = (
    f"{_HELPER}An error occurred in `transformers` while applying chat template\n"
    f"{_HELPER}Traceback (most recent call last):\n"
    f'{_HELPER}  File "/v/vllm/entrypoints/chat_utils.py", line 1390, in apply_hf_chat_template\n'
    f"{_HELPER}    return tokenizer.apply_chat_template(\n"
)


@pytest.mark.parametrize(
    "frame",
    [
        '  File "/v/vllm/entrypoints/chat_utils.py", line 1390, in apply_hf_chat_template',
        '  File "/v/vllm/entrypoints/chat_utils.py", line 1300, in apply_mistral_chat_template',
        '  File "/v/vllm/renderers/hf.py", line 468, in safe_apply_chat_template',
        '  File "/s/sglang/srt/openai/serving_chat.py", line 9, in _apply_jinja_template',
    ],
)
def test_a_frame_applying_a_chat_template_is_a_requests_when_requests_count(frame: str) -> None:
    assert request_frame(frame, sglang=False, serving_counts=lambda: True)
    assert not request_frame(frame, sglang=False, serving_counts=lambda: False)


def test_a_chat_template_traceback_cut_mid_serving_is_a_serving_server() -> None:
    assert _read(_TEMPLATE_TRACEBACK.encode()) == (Verdict.READY, Phase.READY, None)


def test_the_helpers_logged_traceback_fails_no_startup_its_exception_included() -> None:
    head = b"INFO 10-01 07:59:00 [api_server.py:1880] vLLM API server version 0.13.0\n"
    exception = f"{_HELPER}jinja2.exceptions.TemplateError: no system turn\n".encode()
    for log in (
        head + _TEMPLATE_TRACEBACK.encode(),
        head + _TEMPLATE_TRACEBACK.encode() + exception,
    ):
        assert _read(log)[0] is Verdict.STARTING


def test_the_same_traceback_without_the_helpers_announcement_still_fails_a_startup() -> None:
    head = b"INFO 10-01 07:59:00 [api_server.py:1880] vLLM API server version 0.13.0\n"
    traceback = _TEMPLATE_TRACEBACK.split("\n", 1)[1].encode()
    exception = b"ValueError: no system turn\n"
    assert _read(head + traceback + exception)[0] is Verdict.FAILED


# -- serving evidence a wrapper re-logs (field/triton_vllm_backend_request_error_mid_serving,
# field/wrapper_logger_relogs_vllm_request_lines, vllm/offline_eval_processed_prompts_bar) ----


@pytest.mark.parametrize(
    "line",
    [
        'E0101 00:00:01.000001 7 model.py:502] "[vllm] Error generating stream: bad input"',
        "2024-07-31 16:07:33,561 vllm.engine.async_llm_engine 2683 INFO     Added request 0f1e.",
        "[2024-07-31 16:07:35] vllm.engine.async_llm_engine INFO: Finished request cmpl-2.",
        "Processed prompts: 100%|██████████| 64/64 [00:05<00:00, 12.3it/s]",
    ],
)
def test_requests_served_as_a_wrapper_relogs_them_show_a_ready_engine(line: str) -> None:
    assert _read(f"{line}\n".encode()) == (Verdict.READY, Phase.READY, None)


@pytest.mark.parametrize(
    "line",
    [
        "2024-07-31 16:07:33,561 myapp.jobs 2683 INFO     Added request to the queue for later",
        "INFO: Finished request handling setup in 3 s",
        "[vllm] Loading model weights",
    ],
)
def test_lines_that_only_resemble_them_prove_nothing(line: str) -> None:
    assert _read(f"{line}\n".encode())[0] is Verdict.STARTING


def test_a_relogged_request_line_after_a_kept_startup_before_http_is_no_ready_line() -> None:
    log = (
        b"INFO 07-31 16:00:00 api_server.py:212] vLLM API server version 0.5.3\n"
        b"2024-07-31 16:07:33,561 vllm.engine.async_llm_engine 2683 INFO     Added request 0f1e.\n"
    )
    assert _read(log)[0] is Verdict.STARTING
