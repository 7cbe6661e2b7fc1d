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
from firedup.logscan.normalize import clean, engine_says
from firedup.logscan.signatures import NON_ASCII_ROWS, match_signature
from firedup.logscan.wrappers import Wrappers
from tests.unit.test_logscan_shapes import _read

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
        "2025-05-02 09:00:01,002 vllm.v1.engine.async_llm 77 INFO Aborted request(s) c-1,c-2.",
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


# -- causes a cut traceback or a wrapper's lines name (field/hub_refuses_config_httpx_status_
# error, field/hub_download_traceback_cut_in_hf_raise_for_status, field/triton_python_backend_
# initialize_failed) ----------------------------------------------------------------------------

_VLLM_HEAD = b"INFO 04-18 12:30:05 [api_server.py:981] vLLM API server version 0.8.4\n"


@pytest.mark.parametrize(
    "exception",
    [
        "requests.exceptions.HTTPError: 401 Client Error: Unauthorized for url: "
        "https://huggingface.co/org/m/resolve/main/config.json",
        "httpx.HTTPStatusError: Client error '403 Forbidden' for url "
        "'https://hf-mirror.com/api/models/org/m/revision/main'",
        "requests.exceptions.HTTPError: 404 Client Error: Not Found for url: "
        "https://www.modelscope.cn/api/v1/models/org/m/repo?Revision=master",
    ],
)
def test_the_hub_refusing_a_models_files_is_model_not_found(exception: str) -> None:
    log = _VLLM_HEAD + b"Traceback (most recent call last):\n" + f"{exception}\n".encode()
    assert _read(log)[::2] == (Verdict.FAILED, Reason.MODEL_NOT_FOUND)


@pytest.mark.parametrize(
    "exception",
    [
        "requests.exceptions.HTTPError: 401 Client Error: Unauthorized for url: "
        "http://10.0.0.5:9000/v1/chat/completions",  # another service's refusal
        "requests.exceptions.HTTPError: 503 Server Error: Service Unavailable for url: "
        "https://huggingface.co/org/m/resolve/main/config.json",
    ],
)
def test_other_http_errors_name_no_missing_model(exception: str) -> None:
    log = _VLLM_HEAD + b"Traceback (most recent call last):\n" + f"{exception}\n".encode()
    assert _read(log)[::2] == (Verdict.FAILED, Reason.CRASH)


def test_a_traceback_cut_in_hf_raise_for_status_is_model_not_found() -> None:
    cut = (
        b"Traceback (most recent call last):\n"
        b'  File "/v/huggingface_hub/utils/_http.py", line 406, in hf_raise_for_status\n'
        b"    response.raise_for_status()\n"
    )
    assert _read(_VLLM_HEAD + cut)[::2] == (Verdict.FAILED, Reason.MODEL_NOT_FOUND)


@pytest.mark.parametrize(
    "line",
    [
        'I0305 18:02:09.877012 1 pb_stub.cc:366] "Failed to initialize Python stub: KeyError: x"',
        "E0305 18:02:10.102007 1 model_lifecycle.cc:654] \"failed to load 'llm' version 1: "
        'Internal: KeyError: x"',
    ],
)
def test_triton_failing_the_models_initialize_is_engine_init(line: str) -> None:
    assert _read(_VLLM_HEAD + f"{line}\n".encode())[::2] == (Verdict.FAILED, Reason.ENGINE_INIT)


def test_tritons_model_load_failure_after_ready_is_another_models() -> None:
    up = b'I0305 18:05:00.1 1 model_lifecycle.cc:1] "[vllm] Error generating stream: bad"\n'
    line = b"E0305 18:06:00.1 1 model_lifecycle.cc:654] \"failed to load 'b' version 2: x\"\n"
    assert _read(up + line)[0] is Verdict.READY


# -- a death said in the locale's words (field/shell_reports_segfault_in_its_locale) -------------


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("段错误", Reason.CRASH),
        ("段错误 (核心已转储)", Reason.CRASH),
        ("./run.sh: 行 3: 12345 段错误               （核心已转储） python serve.py", Reason.CRASH),
        ("bash: line 1: 811 Erreur de segmentation (core dumped) vllm serve m", Reason.CRASH),
        ("Ошибка сегментирования (образ памяти сброшен на диск)", Reason.CRASH),
        ("已杀死", Reason.KILLED),
        ("./serve.sh: Zeile 7: 48213 Getötet                 python -m vllm", Reason.KILLED),
    ],
)
def test_the_shells_report_of_a_signal_in_another_language_is_that_death(
    line: str, reason: Reason
) -> None:
    assert _read(_VLLM_HEAD + f"{line}\n".encode())[::2] == (Verdict.FAILED, reason)


@pytest.mark.parametrize(
    "line",
    [
        "INFO 04-18 12:30:09 [loader.py:1] Speicherzugriffsfehler werden protokolliert",
        "内存不足时可能出现段错误，请检查驱动",  # prose naming a segfault, not the shell's report
    ],
)
def test_the_words_inside_prose_are_no_report(line: str) -> None:
    assert _read(_VLLM_HEAD + f"{line}\n".encode())[0] is Verdict.STARTING


# -- a notebook's links inside a bar (vllm/notebook_links_inside_a_capture_bar) ------------------


def test_a_notebooks_links_on_a_bars_count_and_unit_are_read_as_the_bar() -> None:
    bar = (
        "Loading safetensors checkpoint shards:  50% Completed | 3[/6](https://h.example/6) "
        "[00:06<00:06,  2.13s[/it](https://h.example/it)]"
    )
    assert clean(bar.encode()) == (
        "Loading safetensors checkpoint shards:  50% Completed | 3/6 [00:06<00:06,  2.13s/it]"
    )
    state = explain(f"{bar}\n".encode())
    assert state.phase is Phase.LOADING_WEIGHTS and state.progress is not None
    assert (state.progress.done, state.progress.total) == (3, 6)


def test_other_links_are_left_as_they_are() -> None:
    colab = "[/usr/lib/python3/vllm/llm.py](https://localhost:8080/) in __init__(self)"
    assert clean(colab.encode()) == colab


# -- a stream's name inside a learned wrapper (field/backend_stream_tag_inside_a_learned_wrapper)


def test_a_stream_name_left_by_a_learned_wrapper_is_learned_before_traceback_lines() -> None:
    outer = "9:01AM DBG GRPC(m-127.0.0.1:4{}): stderr "
    lines = [
        "Traceback (most recent call last):",
        '  File "/b/backend.py", line 3, in <module>',
        "    import vllm",
        '  File "/b/vllm/__init__.py", line 4, in <module>',
    ]
    log = "".join(outer.format(n) + line + "\n" for n, line in enumerate(lines))
    assert _read(log.encode()) == (Verdict.FAILED, Phase.LAUNCHING, Reason.CRASH)


def test_a_stream_word_before_prose_is_no_wrapper() -> None:
    wrappers = Wrappers(plain=engine_says)
    assert wrappers.peel("stderr output was redirected to /tmp/x.log") == (
        "stderr output was redirected to /tmp/x.log"
    )


def test_the_non_ascii_rows_are_read_on_non_ascii_lines_only_and_keep_the_needle_rule() -> None:
    for row in NON_ASCII_ROWS:
        assert row.needle == row.needle.lower() and row.needle.strip(), row
        assert not row.needle.isascii(), row
    assert match_signature("段错误") is not None and match_signature("Segmentation fault")


def test_the_helpers_announcement_cut_by_a_hard_wrap_still_announces_it() -> None:
    head = b"INFO 10-01 07:59:00 [api_server.py:1880] vLLM API server version 0.13.0\n"
    cut = _TEMPLATE_TRACEBACK.replace("`transformers` while", "`transfor\nmers` while", 1)
    exception = f"{_HELPER}jinja2.exceptions.TemplateError: no system turn\n".encode()
    assert _read(head + cut.encode() + exception)[0] is Verdict.STARTING
    other = _TEMPLATE_TRACEBACK.replace("`transformers` while applying chat template", "`x`: oops")
    assert _read(head + other.encode() + exception)[0] is Verdict.FAILED
