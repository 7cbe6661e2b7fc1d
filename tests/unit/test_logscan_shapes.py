"""Evidence in shapes the reader had not met: other frame printers, a validator's line, a paste's
indentation, and what proves a vLLM server was serving; then (the third blind part's misses)
a request's traceback, rows the table missed, deaths said in other words, a viewer's columns.

Each rule also has a crafted fixture pair under tests/fixtures/logs (named in the test); these
tests pin the rule on the smallest input, including the ways it must not fire.
"""

from __future__ import annotations

import pytest

from firedup.engine import Engine
from firedup.logscan import Phase, Reason, Verdict, explain
from firedup.logscan.evidence import is_frame
from firedup.logscan.frames import frame_hint
from firedup.logscan.harmless import asgi_frame, request_frame
from firedup.logscan.normalize import parse_line
from firedup.logscan.signatures import SIGNATURES, match_signature
from firedup.logscan.wrappers import Wrappers

VLLM_UP = (
    b"INFO 05-02 10:00:00 [api_server.py:1043] vLLM API server version 0.9.1\n"
    b"INFO 05-02 10:00:41 [api_server.py:1100] Starting vLLM API server on http://0.0.0.0:8000\n"
    b"INFO:     Application startup complete.\n"
)


def _read(log: bytes) -> tuple[Verdict, Phase, Reason | None]:
    state = explain(log)
    return state.verdict, state.phase, state.reason


def _names(text: str, reason: Reason) -> bool:
    """Whether the line names that reason; True when the row is strong (fatal by itself)."""
    found = match_signature(text)
    assert found is not None and found.reason is reason, text
    return found.strong


# -- a paste's indentation (field/indented_paste_collector_stamps_cut_in_traceback) ----------


def test_indentation_in_front_of_a_collector_stamp_is_the_pastes() -> None:
    line = parse_line("    2026-02-11T09:14:02.511Z INFO 02-11 09:14:02 [core.py:1] Loading")
    assert (line.message, line.level) == ("Loading", "INFO")
    for code in ("    2026 = compute_year(args)", "   12 | int main() {"):  # code stays code
        assert parse_line(code).message == code
    # field/compose_around_an_indented_paste_of_stamped_lines: inside another wrapper too
    for wrapped in (
        "api-1  |     2026-02-11T09:14:02Z ",
        "(Replica pid=4)  \t2026-02-11T09:14:02Z ",
    ):
        line = parse_line(wrapped + "INFO 02-11 09:14:02 [core.py:1] Loading")
        assert line.message == "Loading", wrapped


# -- an exception's message without its exception line ---------------------------------------


def test_pydantics_line_for_the_validator_that_raised_is_an_exception_line() -> None:
    # field/pydantic_value_error_line_alone_model_path
    log = (
        b"  Value error, User-specified max_model_len (65536) is greater than the derived "
        b"max_model_len (max_position_embeddings=32768). [type=value_error, input_value=...]\n"
    )
    assert _read(log) == (Verdict.FAILED, Phase.LAUNCHING, Reason.CONTEXT_LENGTH)
    unknown = b"  Value error, the answer is 42 [type=value_error, input_value=...]\n"
    assert _read(unknown)[0] is Verdict.STARTING  # names no cause: prose, as a bare ValueError


def test_a_max_model_len_too_great_for_model_or_device_is_context_length() -> None:
    # field/bare_valueerror_device_max_model_len_limit
    for text in (
        "User-specified max_model_len (131072) is greater than the derived max_model_len",
        "TT-X does not support max_model_len greater than 32768 on N150 (received 65536)",
    ):
        assert not _names(text, Reason.CONTEXT_LENGTH), "a warning under the override too"
    warned = b"WARNING 05-02 10:00:01 [config.py:1] " + b"User-specified max_model_len (9) is "
    assert _read(warned + b"greater than the derived max_model_len (8).\n")[0] is Verdict.STARTING


@pytest.mark.parametrize("device", ["CUDA", "HIP", "NPU", "XPU", "MUSA"])
def test_any_accelerators_out_of_memory_is_oom(device: str) -> None:
    # field/ascend_npu_out_of_memory_while_loading
    _names(f"RuntimeError: {device} out of memory. Tried to allocate 2.00 GiB", Reason.OOM)
    assert match_signature("the run is out of memory budget for tea") is None


def test_a_gated_repository_in_either_wording_is_model_not_found() -> None:
    # vllm/gated_repo_oserror_without_its_class_name
    for text in (
        "OSError: You are trying to access a gated repo.",
        "huggingface_hub.errors.GatedRepoError: 401 Client Error. Cannot access gated repo for url",
    ):
        _names(text, Reason.MODEL_NOT_FOUND)


def test_an_exception_raised_while_the_command_line_is_parsed_is_bad_args() -> None:
    # vllm/parse_args_valueerror_is_bad_args
    assert frame_hint('  File "/v/vllm/utils/__init__.py", line 1488, in parse_args') is (
        Reason.BAD_ARGS
    )
    named = (
        b"Traceback (most recent call last):\n"
        b'  File "/v/vllm/utils/__init__.py", line 1488, in parse_args\n'
        b"OSError: /m does not appear to have a file named config.json\n"
    )
    assert _read(named)[2] is Reason.MODEL_NOT_FOUND  # a cause the exception names wins


# -- frames of other printers -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "frame"),
    [
        # IPython's, Colab's (linked), IPython 8's, a notebook cell (field/ipython_traceback_...)
        ("/usr/lib/python3/site-packages/vllm/llm.py in __init__(self, model, **kwargs)", True),
        ("[/usr/local/lib/vllm/utils.py](https://localhost:8080/#) in inner(*args)", True),
        ("File /usr/lib/python3/site-packages/vllm/llm.py:193, in LLM.__init__(self)", True),
        ("Cell In[3], line 1", True),
        ("<ipython-input-5-0f3b2c> in <module>()", True),
        ("[/usr/local/lib/python3.11/dist-packages/vllm/utils.py](https://localhost:8080/", True),
        # the Ascend runtime's native error stack (field/ascend_runtime_error_stack_cut)
        (
            "  open device 3 failed, result = 507033.[FUNC:Report][FILE:log_inner.cpp][LINE:161]",
            True,
        ),
        ('  File "/x/vllm/core.py", line 10, in run', True),
        ("/usr/lib/python3/site-packages/torch/cuda/__init__.py:129: UserWarning: no GPU", False),
        ("see utils.py in the repository for the details", False),
        ("[FUNC:x] alone, not at the end of the line [FILE:y]", False),
    ],
)
def test_frames_are_known_whoever_printed_the_traceback(line: str, frame: bool) -> None:
    assert is_frame(line) is frame


def test_a_log_that_ends_in_another_printers_frames_failed() -> None:
    cut = (
        b"/usr/lib/python3/site-packages/vllm/engine/llm_engine.py in from_engine_args(cls)\n"
        b"    413             executor_class = GPUExecutor\n"
        b"--> 415         engine = cls(\n"
        b"    416             *engine_configs,\n"
    )
    assert _read(cut) == (Verdict.FAILED, Phase.LAUNCHING, Reason.CRASH)
    survived = cut + b"INFO 05-02 10:00:41 [core.py:1] Loading weights took 3.1 seconds\n"
    assert _read(survived)[0] is Verdict.STARTING


# -- what proves a vLLM server was serving ----------------------------------------------------

NCCL = b"gpu7:930:930 [0] NCCL INFO Channel 02/0 : 0[0] -> 1[1] via P2P/CUMEM\n"
STATS = (
    b"(APIServer pid=3) INFO 03-04 11:20:10 [loggers.py:123] Engine 000: Avg prompt throughput: "
    b"0.0 tokens/s, Avg generation throughput: 6.0 tokens/s, Running: %d reqs, Waiting: 0 reqs\n"
)


def test_vllms_stats_prove_ready_whatever_came_before() -> None:
    # vllm/stats_with_running_requests_prove_ready_after_nccl_chatter
    assert _read(NCCL + STATS % 3)[0] is Verdict.READY
    assert _read(NCCL + STATS % 0)[0] is Verdict.READY  # at INFO only when tokens went through
    assert _read(NCCL + b"Running: 3 reqs\n")[0] is Verdict.STARTING  # words, not its stats
    sglang = b"[2026-03-02 10:00:05 TP0] Load weight begin. avail mem=78.50 GB\n"
    assert _read(sglang + STATS % 3)[0] is Verdict.STARTING  # SGLang: its ready line


@pytest.mark.parametrize(
    "line",
    [
        b"Received request chatcmpl-9f2: params: SamplingParams(n=1), lora_request: None.",
        b"Added request cmpl-77a1-0.",
        b"Aborted request(s) chatcmpl-9f2.",
        b"Generated response chatcmpl-9f2: output: 'Hi', finish_reason: stop",
        b"SpecDecoding metrics: Mean acceptance length: 2.10, Accepted: 120 tokens",
    ],
)
def test_vllms_request_log_shows_a_serving_server(line: bytes) -> None:
    # vllm/request_log_after_loading_shows_a_serving_server
    loading = b"INFO 05-02 10:00:30 [default_loader.py:267] Loading weights took 20.12 seconds\n"
    logged = b"INFO 05-02 10:09:00 [logger.py:43] " + line + b"\n"
    assert _read(loading + logged)[0] is Verdict.READY
    assert _read(loading + b"INFO 05-02 10:09:00 [logger.py:43] Added the model.\n")[0] is (
        Verdict.STARTING
    )


def test_an_error_logged_by_a_request_handler_shows_a_serving_server() -> None:
    # vllm/request_handler_error_alone_is_a_serving_server
    handler = b"(APIServer pid=1) ERROR 05-02 10:11:12 [serving_chat.py:257] ValueError: bad\n"
    assert _read(handler) == (Verdict.READY, Phase.READY, None)
    assert _read(handler.replace(b"[serving_chat.py:257]", b"serving_chat.py:257]"))[0] is (
        Verdict.READY  # vLLM V0's stamp
    )
    assert _read(handler.replace(b"] ValueError: bad", b"]"))[0] is Verdict.READY  # wrapped there
    startup = b"(APIServer pid=1) INFO 05-02 10:11:12 [serving_chat.py:90] Using default params\n"
    assert (
        _read(startup)[0] is Verdict.STARTING
    )  # the handler is built at startup: INFO proves none
    dead = b"(APIServer pid=1) ERROR 05-02 10:11:12 [serving.py:1173] vllm.v1.engine.exceptions."
    assert _read(dead + b"EngineDeadError: EngineCore encountered an issue.\n")[0] is (
        Verdict.FAILED  # a handler reporting the engine dead is that failure, no proof of ready
    )


def test_a_traceback_through_a_request_handler_shows_a_serving_server() -> None:
    # vllm/cancelled_request_then_handler_traceback_cut
    frame = b'  File "/v/vllm/entrypoints/openai/api_server.py", line 512, in create_completion\n'
    code = b"    generator = await handler.create_completion(request, raw_request)\n"
    assert _read(b"Traceback (most recent call last):\n" + frame + code)[0] is Verdict.READY
    # vllm/handler_frame_wrapped_in_three_pieces_then_cut: the frame's wrapped tail names it
    wrapped = b'  File "/v/vllm/entrypoints/openai/serving_completion.py", line 310, in\n'
    tail = b"completion_stream_generator\n    async for res in result_generator:\n"
    assert _read(b"Traceback (most recent call last):\n" + wrapped + tail)[0] is Verdict.READY
    # vllm/handler_frame_cut_mid_name_its_code_calls_it: the route's code calls the handler
    cut = b'  File "/v/vllm/entrypoints/openai/api_server.py", line 640, in create_chat_c\nomp\n'
    calls = b"    generator = await handler.create_chat_completion(request, raw_request)\n"
    assert _read(b"Traceback (most recent call last):\n" + cut + calls)[0] is Verdict.READY
    startup = (
        b'  File "/v/vllm/entrypoints/openai/api_server.py", line 90, in create_server_socket\n'
    )
    bind = b"    sock.bind(addr)\n"
    assert _read(b"Traceback (most recent call last):\n" + startup + bind)[0] is Verdict.FAILED


def test_a_cancelled_task_names_no_failure() -> None:
    cancelled = (
        b"Traceback (most recent call last):\n"
        b'  File "/usr/lib/python3.11/asyncio/locks.py", line 213, in wait\n'
        b"asyncio.exceptions.CancelledError\n"
    )
    assert _read(cancelled)[0] is Verdict.STARTING
    after = cancelled + b"RuntimeError: Engine core initialization failed. See root cause above.\n"
    assert _read(after)[2] is Reason.ENGINE_INIT


def test_a_traceback_cut_after_a_stop_is_the_stops() -> None:
    stop = b"INFO 05-02 10:00:03 [launcher.py:80] Received SIGTERM, shutting down\n"
    cut = b'Traceback (most recent call last):\n  File "/v/x.py", line 3, in run\n    loop()\n'
    assert _read(stop + cut)[0] is Verdict.STARTING
    assert _read(cut)[0] is Verdict.FAILED


def test_an_engine_process_found_dead_fails_a_ready_server() -> None:
    # vllm/v0_engine_process_died_while_serving
    died = (
        b'  File "/v/vllm/engine/multiprocessing/client.py", line 650, in _process_request\n'
        b"MQEngineDeadError: Engine loop is not running: RuntimeError('Engine process (pid 91) "
        b"died.')\n"
    )
    assert _read(VLLM_UP + died) == (Verdict.FAILED, Phase.READY, Reason.CRASH)
    stop = b"INFO 05-02 10:08:59 [launcher.py:80] Received SIGTERM, shutting down\n"
    assert _read(VLLM_UP + stop + died)[0] is Verdict.READY
    # vllm/v0_engine_dead_bare_line_after_ready: an exception quoting its cause is no echo,
    bare = b"MQEngineDeadError: Engine loop is not running: RuntimeError('Engine process (pid 9) "
    assert _read(VLLM_UP + bare + b"died.')\n")[0] is Verdict.FAILED
    # vllm/v0_engine_dead_line_hard_wrapped_after_ready: the cause on the wrapped line's rest
    wrapped = b"MQEngineDeadError: Engine loop is not running. Inspect the stacktrace to find e\n"
    rest = b"rror: RuntimeError('Engine process (pid 9) died.').\n"
    assert _read(VLLM_UP + wrapped + rest)[0] is Verdict.FAILED
    noise = b"WARNING: Running pip as the 'root' user can result in broken permissions and more\n"
    own = b"vllm.engine.multiprocessing." + bare + b"died.')\n"  # its own line, lower-case first
    assert _read(VLLM_UP + noise + own)[0] is Verdict.FAILED
    prompt = b"Received request c-1: prompt: 'Engine process (pid 9) died.', params: None\n"
    assert _read(VLLM_UP + prompt)[0] is Verdict.READY  # but a logged prompt's text is data


# -- lines that name the engine or the phase --------------------------------------------------


def test_the_route_list_names_vllm_so_uvicorns_line_means_ready() -> None:
    # vllm/route_list_then_startup_complete_names_vllm
    routes = b"INFO 07-09 14:02:11 [launcher.py:29] Route: /v1/completions, Methods: POST\n"
    state = explain(routes + b"INFO:     Application startup complete.\n")
    assert (state.verdict, state.engine) == (Verdict.READY, Engine.VLLM)
    template = b"INFO 07-09 14:02:11 [chat_utils.py:1] Detected the chat template content format"
    assert explain(template + b" to be 'string'.\n").engine is Engine.VLLM


def test_any_graph_capture_line_or_bar_is_the_capture() -> None:
    # vllm/per_size_graph_capture_lines_cut, vllm/capture_bar_of_another_kind
    per_size = (
        b"INFO 02-03 04:05:06 [gpu_model_runner.py:3100] Graph capturing for 512 input tokens\n"
    )
    assert _read(per_size)[1] is Phase.CUDA_GRAPH
    bar = b"Capturing prefill CUDA graphs:  40%|####      | 4/10 [00:01<00:02,  3.10it/s]\n"
    assert _read(bar)[1] is Phase.CUDA_GRAPH


def test_a_log_cut_in_its_traceback_shows_its_last_frames_once() -> None:
    frames = [
        b'  File "/v/vllm/v1/engine/core.py", line %d, in %s\n    %s\n' % (line, name, code)
        for line, name, code in (
            (10, b"run_engine_core", b"engine_core = EngineCoreProc(*args, **kwargs)"),
            (80, b"__init__", b"self._init_executor()"),
        )
    ]
    cut = b"Traceback (most recent call last):\n" + b"".join(frames)
    state = explain(cut)
    assert state.verdict is Verdict.FAILED
    assert state.excerpt[-2:] == (
        '  File "/v/vllm/v1/engine/core.py", line 80, in __init__',
        "    self._init_executor()",
    )
    assert len(set(state.excerpt)) == len(state.excerpt)


# == the third blind part's misses (each crafted, none copied) ==============================

_ASGI = (
    b"Traceback (most recent call last):\n"
    b'  File "/srv/env/lib/python3.12/site-packages/uvicorn/protocols/http/httptools_impl.py",'
    b" line 401, in run_asgi\n"
    b"    result = await app(  # type: ignore[func-returns-value]\n"
    b'  File "/srv/env/lib/python3.12/site-packages/starlette/applications.py", line 112,'
    b" in __call__\n"
    b"    await self.middleware_stack(scope, receive, send)\n"
)


# -- a request's traceback (field/request_traceback_cut_in_uvicorn_run_asgi_no_startup) ------


def test_a_frame_in_uvicorns_run_asgi_is_a_requests_and_only_that_frame() -> None:
    assert asgi_frame('  File "/x/uvicorn/protocols/http/h11_impl.py", line 403, in run_asgi')
    assert not asgi_frame('  File "/x/app.py", line 3, in run_asgi_later')
    assert not asgi_frame("    result = await app(  # run_asgi")


def test_a_log_that_is_only_a_cut_request_traceback_shows_a_serving_server() -> None:
    """No startup line before it: the log starts mid-serving, and the HTTP server was
    serving the request the traceback belongs to; a request's error is not the server's."""
    assert _read(_ASGI) == (Verdict.READY, Phase.READY, None)


def test_after_sglangs_startup_a_request_traceback_is_not_its_ready_line() -> None:
    """SGLang serves its own warm-up request before its ready line: after its startup began,
    a request's frame does not prove it ready."""
    log = (
        b"[2026-03-14 09:10:00] server_args=ServerArgs(model_path='m', port=30000)\n"
        b"[2026-03-14 09:11:00] INFO:     Uvicorn running on http://0.0.0.0:30000\n" + _ASGI
    )
    assert _read(log)[0] is not Verdict.READY


# -- rows the table missed (field/unsupported_architectures_lone_line_cut_in_list,
#    field/sglang_warmup_failed_aborting_startup_then_shutdown) ------------------------------


def test_every_rows_needle_is_in_what_its_pattern_matches() -> None:
    """A row's needle gates its pattern: an alternative without the needle never fired
    (`Unsupported architectures: X` was missed behind the needle "not supported")."""
    line = "ValueError: Unsupported architectures: AcmeLM. Supported list: ['BetaLM', 'Gam"
    found = match_signature(line)
    assert found is not None and found.reason is Reason.UNSUPPORTED_MODEL and not found.strong
    assert _read(line.encode()) == (Verdict.FAILED, Phase.LAUNCHING, Reason.UNSUPPORTED_MODEL)
    for sig in SIGNATURES:
        for alternative in _alternatives(sig.pattern.pattern):
            assert sig.needle in alternative.replace("\\", "").lower(), (sig.needle, alternative)


# == the fourth blind part's misses (each crafted, none copied) =============================

# -- SGLang's OpenAI route (field/sglang_openai_route_traceback_cut_no_startup) --------------

_ROUTE = '  File "/e/sglang/srt/server.py", line 158, in openai_v1_chat_completions'


def test_sglangs_openai_route_frame_is_a_requests_only_when_requests_count() -> None:
    assert request_frame(_ROUTE, sglang=True, serving_counts=lambda: True)
    assert not request_frame(_ROUTE, sglang=True, serving_counts=lambda: False)
    assert not request_frame(
        '  File "/e/app.py", line 3, in openai_v1_chat_completions_later',
        sglang=True,
        serving_counts=lambda: True,
    )


def test_a_cut_traceback_in_sglangs_openai_route_with_no_startup_is_a_served_request() -> None:
    log = (
        b"Traceback (most recent call last):\n" + _ROUTE.encode() + b"\n"
        b"    return await v1_chat_completions(tokenizer_manager, raw_request)\n"
    )
    assert _read(log) == (Verdict.READY, Phase.READY, None)


def test_sglangs_openai_route_is_read_from_its_code_line_when_a_wrap_cut_the_frame() -> None:
    log = (
        b"Traceback (most recent call last):\n" + _ROUTE[:-12].encode() + b"\n"
        b"completions\n    return await v1_chat_completions(tokenizer_manager, raw_request)\n"
    )
    assert _read(log) == (Verdict.READY, Phase.READY, None)


# -- a native backtrace (field/native_backtrace_frames_behind_ray_tag_end_of_log) ------------

_NATIVE = "frame #7: _PyEval_EvalFrameDefault + 0x72c (0x55d1c75cbc5c in /usr/bin/python3)"


@pytest.mark.parametrize(
    "line",
    [
        _NATIVE,
        "_PyEval_EvalFrameDefault + 0x72c (0x55d1c75cbc5c in /usr/bin/python3)",  # tag peeled
        "frame [#7](https://github.com/o/r/pull/7): clone + 0x44 (0x7f3a5e925a04 in libc.so.6)",
        "frame #0: <unknown function> + 0x2114c9 (0x5578c76a84c9 in sglang::scheduler_TP0)",
        "frame #0: <unknown function> + 0x2114c9 (0x5578c76a84c9 in sglang::sched",  # wrapped
    ],
)
def test_a_native_backtrace_frame_is_a_frame(line: str) -> None:
    assert is_frame(line)


@pytest.mark.parametrize(
    "line",
    ["offset + 0x10 (0x20 in total) was read", "frame #7: rendered in 12 ms", "x + 0x1c"],
)
def test_prose_with_hex_offsets_is_no_native_frame(line: str) -> None:
    assert not is_frame(line)


def test_a_log_that_ends_in_native_frames_failed_unless_it_was_serving() -> None:
    start = b"[2026-02-11 10:02:13 TP0] Load weight begin. avail mem=61.02 GB\n"
    frames = b"".join(f"{_NATIVE}\n".replace("#7", f"#{n}").encode() for n in range(4))
    assert _read(start + frames)[0] is Verdict.FAILED
    ready = b"[2026-02-11 10:03:00] The server is fired up and ready to roll!\n"
    assert _read(start + ready + frames)[0] is Verdict.READY


# -- a container's name (field/container_name_word_prefix_traceback_cut_in_frames) -----------


def test_one_word_and_a_space_before_a_record_is_a_wrapper_but_not_a_phrase() -> None:
    word = Wrappers()
    word.saw("model-server ")
    peeled = word.strip('model-server   File "/a/b.py", line 3, in f')  # noqa: B005 - a method
    assert peeled == '  File "/a/b.py", line 3, in f'
    nested = Wrappers()
    nested.saw("[rank0]: model-server ")
    inner = nested.strip("[rank0]: model-server Traceback (most recent")  # noqa: B005 - a method
    assert inner == "Traceback (most recent"
    phrase = Wrappers()
    phrase.saw("the server said ")
    assert not phrase.learned


def test_a_traceback_behind_a_containers_name_is_read_as_one() -> None:
    log = (
        b"api INFO 03-18 11:20:44 [api_server.py:1043] vLLM API server version 0.9.1\n"
        b"api Traceback (most recent call last):\n"
        b'api   File "/app/launch.py", line 88, in main\n'
        b"api     engine = build_engine(args)\n"
    )
    assert _read(log)[:2] == (Verdict.FAILED, Phase.LAUNCHING)


# -- old phase lines (field/sglang_old_init_nccl_begin_per_gpu_id_cut,
#    vllm/v0_mqllmengine_starting_engine_loop_cut) ------------------------------------------


def test_sglangs_old_init_nccl_line_on_every_gpu_is_init_distributed_not_a_draft() -> None:
    log = b"server_args=ServerArgs(model_path='m', port=30000, tp_size=2)\n" + b"".join(
        f"[gpu_id={n}] Init nccl begin.\n".encode() for n in range(4)
    )
    assert _read(log) == (Verdict.STARTING, Phase.INIT_DISTRIBUTED, None)


def test_v0s_engine_loop_starting_is_past_the_kv_cache() -> None:
    log = (
        b"INFO 05-12 14:00:41 [api_server.py:1043] vLLM API server version 0.8.3\n"
        b"INFO 05-12 14:02:10 [llm_engine.py:431] init engine (profile, create kv cache, "
        b"warmup model) took 38.12 seconds\n"
    )
    assert _read(log)[1] is Phase.KV_CACHE
    loop = b"DEBUG 05-12 14:02:14 [engine.py:157] Starting Engine Loop.\n"
    assert _read(log + loop) == (Verdict.STARTING, Phase.HTTP_UP, None)


def _alternatives(pattern: str) -> list[str]:
    """A pattern's top-level alternatives (split at each `|` outside any group)."""
    parts, depth, start = [], 0, 0
    for at, char in enumerate(pattern):
        escaped = at > 0 and pattern[at - 1] == "\\"
        depth += (char == "(" and not escaped) - (char == ")" and not escaped)
        if char == "|" and depth == 0 and not escaped:
            parts.append(pattern[start:at])
            start = at + 1
    return [*parts, pattern[start:]]


def test_a_warmup_that_aborts_the_startup_is_the_warmups_failure() -> None:
    found = match_signature("Server warmup failed; aborting startup: HTTP server did not become")
    assert found is not None and found.reason is Reason.WARMUP_FAILED and found.strong
    assert match_signature("cuda graph warmup failed, falling back to eager") is None


# -- deaths said in other words (vllm/v0_serving_then_execute_model_input_dumped,
#    field/wrapper_reports_server_failed_to_start_within_timeout) -----------------------------


def test_v0s_dump_of_a_failed_execution_is_the_engines_death_even_while_serving() -> None:
    """vLLM V0 (worker/model_runner_base.py, dump_input_when_exception) dumps the batch and
    re-raises: the engine loop dies, so a serving server fails (crash; a named cause after
    it, `Error in model execution: NCCL error`, sharpens it)."""
    serving = b'INFO:     10.0.0.9:40000 - "POST /v1/completions HTTP/1.1" 200 OK\n'
    dumped = (
        b"INFO 03-04 11:20:02 model_runner_base.py:120] Writing input of failed execution to"
        b" /tmp/err_execute_model_input_20260304-112002.pkl...\n"
    )
    assert _read(serving + dumped) == (Verdict.FAILED, Phase.READY, Reason.CRASH)
    found = match_signature("RuntimeError: Error in model execution (input dumped to /tmp/x.pkl)")
    assert found is not None and found.reason is Reason.CRASH and found.strong
    named = b"RuntimeError: Error in model execution: NCCL error: unhandled cuda error\n"
    assert _read(serving + dumped + named)[2] is Reason.NCCL


def test_a_wrapper_saying_its_server_never_came_up_in_time_is_a_failure() -> None:
    found = match_signature("[Error] (WrappedServer) vllm-server failed to start within timeout")
    assert found is not None and found.reason is Reason.CRASH and found.strong
    assert match_signature("Waiting for vllm-server to be ready (timeout: 600s)...") is None


# -- the compiler's own words (field/jit_compiler_fatal_error_compilation_terminated_no_traceback)


def test_a_compilers_fatal_error_and_its_close_are_a_jit_build_failure() -> None:
    for line in (
        "compilation terminated.",
        "/usr/local/cuda/include/cuda_fp8.hpp:14:10: fatal error: nv/target: No such file",
        "/root/.cache/jit/op.cu:7: fatal error: cuda_bf16.h: No such file or directory",
    ):
        found = match_signature(line)
        assert found is not None and found.reason is Reason.JIT_BUILD and found.strong, line
    for prose in ("the compilation terminated early, retrying", "fatal error: model not found"):
        assert (
            match_signature(prose) is None or match_signature(prose).reason is not Reason.JIT_BUILD
        )


# -- a viewer's columns and a quote (field/viewer_quoted_tab_columns_newest_first_weight_bars)

_BAR = "Loading safetensors checkpoint shards:  48% Completed | 44/90 [03:44<02:10, 2.9s/it]"


def test_a_quote_and_a_viewers_tab_separated_stamp_are_peeled() -> None:
    for prefix in ("> ", ">\t \t", "2026-05-20 10:14:03.117\t", ">  \t2026-05-20 10:14:03\t"):
        line = parse_line(prefix + _BAR + "\t")
        assert line.message.rstrip() == _BAR, prefix
    stamped = parse_line("2026-05-20 10:14:03.117\t" + _BAR)
    assert stamped.stamp is not None
    assert _read(f">\t2026-05-20 10:14:03.117\t{_BAR}\n".encode())[1] is Phase.LOADING_WEIGHTS


def test_a_stamp_and_a_space_is_the_programs_own_format_and_stays() -> None:
    """KServe's and Python logging's asctime (`2024-07-01 07:28:04.488 1 kserve ERROR`): the
    program's line, not a viewer's column, so nothing is peeled."""
    text = "2024-07-01 07:28:04.488 1 kserve ERROR [__main__.py:<module>():254] Failed to start"
    assert parse_line(text).message == text


# -- a harmless line hard-wrapped (field/nccl_warn_bind_in_use_hard_wrapped_is_harmless) ------

_WARN = b"gpu-node-7:41022:41022 [0] ras/client_support.cc:160 NCCL WARN Call to bind failed: "


def test_a_harmless_line_cut_mid_word_stays_harmless_on_either_side_of_the_cut() -> None:
    """NCCL's RAS client warns when its port is taken; cut inside the signature, or inside the
    harmless words, its rest must not read as the server's port in use."""
    inside_signature = _WARN + b"Address alre\nady in use\n"
    inside_harmless = _WARN[:60] + b"\n" + _WARN[60:] + b"Address already in use\n"
    assert inside_harmless.split(b"\n")[0].endswith(b"NCCL WA")
    for log in (inside_signature, inside_harmless):
        assert _read(log)[0] is Verdict.STARTING, log


def test_a_real_failure_after_a_long_harmless_line_still_fails() -> None:
    after = _WARN + b"Address already in use\n"
    assert _read(after + b"OSError: [Errno 98] Address already in use\n")[2] is Reason.PORT_IN_USE
    assert _read(after + b"Killed\n")[0] is Verdict.FAILED


# == the fifth blind part's misses (each crafted, none copied) ==============================

# -- a streaming body's generator (field/framework_stream_results_request_error_cut) ---------

_STREAM = '  File "/e/serve/api/http.py", line 1440, in stream_results'


def test_a_stream_results_frame_is_a_requests_only_when_requests_count() -> None:
    assert request_frame(_STREAM, sglang=True, serving_counts=lambda: True)
    assert request_frame(_STREAM, sglang=False, serving_counts=lambda: True)
    assert not request_frame(_STREAM, sglang=True, serving_counts=lambda: False)
    assert not request_frame(_STREAM + "_later", sglang=True, serving_counts=lambda: True)


def test_a_cut_traceback_in_a_streaming_body_with_no_startup_is_a_served_request() -> None:
    log = (
        b"ERROR    Completion stream failed: Response payload is not completed\n"
        b"Traceback (most recent call last):\n" + _STREAM.encode() + b"\n"
        b"    async for chunk in iterator:\n"
    )
    assert _read(log) == (Verdict.READY, Phase.READY, None)


@pytest.mark.parametrize("frame", [_ROUTE, _STREAM], ids=["openai_route", "stream_results"])
def test_after_sglangs_startup_a_request_frame_is_not_its_ready_line(frame: str) -> None:
    """SGLang's warm-up request runs through them: its startup needs its ready line."""
    log = (
        b"[2026-03-14 09:10:00] server_args=ServerArgs(model_path='m', port=30000)\n"
        b"Traceback (most recent call last):\n" + frame.encode() + b"\n"
    )
    assert _read(log)[0] is not Verdict.READY


# -- a cut traceback after the failure (vllm/v1_workerproc_failed_to_start_then_cut_traceback) -

_FAILED_TO_START = b"ERROR 07-02 09:41:18 [core.py:396] EngineCore failed to start.\n"
_CUT = (
    b"Traceback (most recent call last):\n"
    b'  File "/e/vllm/v1/engine/core.py", line 387, in run_engine_core\n'
    b"    engine_core = EngineCoreProc(*args, **kwargs)\n"
)


def test_a_cut_traceback_after_the_failure_is_that_failures_and_names_no_crash() -> None:
    assert _read(_FAILED_TO_START + _CUT)[2] is Reason.ENGINE_INIT


def test_a_cut_traceback_alone_is_still_a_crash() -> None:
    assert _read(_CUT)[:1] == (Verdict.FAILED,)
    assert _read(_CUT)[2] is Reason.CRASH


def test_a_cut_traceback_after_the_failure_still_names_where_it_ran() -> None:
    nccl = b'  File "/e/vllm/distributed/device_communicators/pynccl.py", line 99, in __init__\n'
    assert _read(_FAILED_TO_START + _CUT + nccl)[2] is Reason.NCCL


# -- requests served, as other logs show them (field/sglang_receive_request_log_mid_serving_
# wrapped, field/serving_shortened_rank_tagged_batches_and_access_lines,
# field/kv_connector_lmcache_request_lines_mid_serving) ----------------------------------------


@pytest.mark.parametrize(
    "line",
    [
        "Receive: obj=GenerateReqInput(rid='1', text='hi', sampling_params={})",
        "Receive: obj=EmbeddingReqInput(rid='2', text='hi')",
        "[TP3] Decode batch. #running-req: 4, #token: 812, token usage: 0.02",
        '[INFO] "POST /v1/chat/completions" 200 OK',
        "LMCache INFO: Retrieved 0 out of 256 required tokens (from 512 total tokens).",
        "LMCache INFO: Reqid: chatcmpl-1, Total tokens 263, LMCache hit tokens: 256",
        "LMCache: Stored/updated 1 chunks, total time 0.00s",
        "LMCache: Store skips 0 tokens and then stores 74 tokens",
    ],
)
def test_a_request_served_as_another_log_shows_it_is_a_ready_server_mid_serving(line: str) -> None:
    assert _read(f"{line}\n".encode()) == (Verdict.READY, Phase.READY, None)


@pytest.mark.parametrize(
    "line",
    [
        '[INFO] "GET /v1/models" 200 OK',  # metadata: the HTTP side alone answers it
        '[INFO] "POST /generate" 503 Service Unavailable',
        "LMCache INFO: Creating LMCacheEngine with config: chunk_size=256",
        "Receive: obj is None",
    ],
)
def test_lines_that_serve_no_request_prove_nothing(line: str) -> None:
    assert _read(f"{line}\n".encode())[0] is Verdict.STARTING


def test_sglangs_logged_warm_up_request_after_its_startup_is_not_its_ready_line() -> None:
    log = (
        b"[2026-03-14 09:10:00] server_args=ServerArgs(model_path='m', port=30000)\n"
        b"[2026-03-14 09:10:40] Receive: obj=GenerateReqInput(rid='w', text='The capital')\n"
    )
    assert _read(log)[0] is Verdict.STARTING


# -- a model's own graph wrapper (vllm/model_graph_wrapper_warmup_per_size_cut) --------------


@pytest.mark.parametrize(
    "line",
    [
        "Starting CUDA Graph warmup for 11 sizes: [2, 4, 8]",
        "Starting CUDA Graph warmup for 4 shapes: batch_sizes=[1, 2] seq_lens=[64, 128]",
        "  Captured CUDA Graph for size=64",
        "  Captured prefix CUDA Graph for batch=2",
    ],
)
def test_a_graph_wrappers_warmup_per_size_is_the_cuda_graph_phase(line: str) -> None:
    log = f"INFO 09-14 08:03:02 [graph_wrapper.py:88] {line}\n".encode()
    assert _read(log) == (Verdict.STARTING, Phase.CUDA_GRAPH, None)


def test_a_line_merely_naming_cuda_graphs_is_no_phase() -> None:
    log = b"INFO 09-14 08:03:02 [config.py:88] CUDA Graph capture is disabled for this model\n"
    assert _read(log)[1] is not Phase.CUDA_GRAPH


# -- vLLM 0.2 sized no cache block (vllm/v02_zero_gpu_blocks_then_traceback_cut) -------------

_BLOCKS = b"INFO 02-03 17:41:30 llm_engine.py:207] # GPU blocks: %d, # CPU blocks: 512\n"


def test_zero_gpu_blocks_names_oom_for_the_failure_after_it() -> None:
    cut = b'Traceback (most recent call last):\n  File "/opt/app/serve.py", line 41, in <module>\n'
    assert _read(_BLOCKS % 0 + cut)[::2] == (Verdict.FAILED, Reason.OOM)


def test_gpu_blocks_sized_fail_nothing() -> None:
    for blocks in (0, 1024, 10):
        assert _read(_BLOCKS % blocks)[0] is Verdict.STARTING
