"""Round eleven (the tenth blind part's misses: 41% SGLang, many engines dying while serving):
an engine's death said by the record that logs it (V1's batch dump, V0's engine-loop record),
serving shown by a scheduler's preemption or a request failed inside its handler, and the
engine's word that its startup failed, cut where the line ends.

Each rule also has a crafted fixture pair under tests/fixtures/logs (named in the section);
these tests pin the rule on the smallest input, including the ways it must not fire.
"""

from __future__ import annotations

import pytest

from firedup.logscan import Phase, Reason, Verdict
from firedup.logscan.harmless import SERVING, engine_loop_died, serves_requests
from firedup.logscan.signatures import match_signature
from tests.unit.test_logscan_shapes import _read

# -- V1's engine core dumping the batch it failed (vllm/v1_engine_core_dumps_a_failed_batch_
# mid_serving) ------------------------------------------------------------------------------

_DUMP = "(EngineCore_DP0 pid=7) ERROR 03-01 10:00:00 [dump_input.py:69] "


def test_the_engine_cores_dump_of_a_failed_batch_is_a_serving_engine_dying() -> None:
    log = f"{_DUMP}Dumping input data for V1 LLM engine (v0.9.1) with config: model='m'\n"
    assert _read(log.encode()) == (Verdict.FAILED, Phase.READY, Reason.CRASH)
    match = match_signature("Dumping input data for V1 LLM engine (v0.9.1) with config: x")
    assert match is not None and match.strong


def test_the_dump_follows_a_kept_startup_as_the_same_death() -> None:
    head = b"INFO 03-01 09:58:00 [api_server.py:1] vLLM API server version 0.9.1\n"
    log = head + f"{_DUMP}Dumping input data for V1 LLM engine (v0.9.1) with config: m\n".encode()
    assert _read(log) == (Verdict.FAILED, Phase.READY, Reason.CRASH)


def test_words_about_dumping_prove_nothing() -> None:
    for line in ("INFO 03-01 10:00:00 [x.py:1] Dumping input data to /tmp/in.pkl\n",):
        assert _read(line.encode())[0] is Verdict.STARTING


# -- V0's engine-loop record (vllm/v0_engine_loop_record_cut_inside_its_message) ------------

_LOOP = "ERROR 06-11 17:40:02 async_llm_engine.py:64] "


@pytest.mark.parametrize(
    "text",
    [
        f"{_LOOP}        [ 1, 32, 32],",
        f"{_LOOP}",
        "ERROR 06-11 17:40:02 [async_llm_engine.py:64] Engine background task failed",
        "(APIServer pid=1) ERROR 06-11 17:40:02 [async_llm_engine.py:70]     raise e",
    ],
)
def test_any_line_of_v0s_engine_loop_record_is_the_serving_engine_dying(text: str) -> None:
    assert engine_loop_died(text, "ERROR")
    assert _read(f"{text}\n".encode()) == (Verdict.FAILED, Phase.READY, Reason.CRASH)


@pytest.mark.parametrize(
    ("text", "level"),
    [
        ("INFO 06-11 17:40:02 async_llm_engine.py:174] Added request cmpl-1.", "INFO"),
        ("ERROR 06-11 17:40:02 async_llm.py:64] Engine background task failed", "ERROR"),
        ("ERROR 06-11 17:40:02 [async_llm_engine.py] no line number", "ERROR"),
    ],
)
def test_other_records_are_not_the_engine_loops(text: str, level: str) -> None:
    assert not engine_loop_died(text, level)


def test_an_info_record_of_the_engine_loops_file_is_serving_not_a_death() -> None:
    line = b"INFO 06-11 17:40:02 async_llm_engine.py:174] Added request cmpl-1.\n"
    assert _read(line) == (Verdict.READY, Phase.READY, None)


# -- V0's scheduler preempting a request (vllm/v0_scheduler_preempts_a_request_one_line) ----

_PREEMPT = (
    "Sequence group 9 is preempted by PreemptionMode.RECOMPUTE mode because there is not "
    "enough KV cache space. total_num_cumulative_preemption=1"
)


def test_a_preempted_sequence_group_shows_an_engine_serving() -> None:
    assert serves_requests(f"WARNING 01-01 00:00:00 scheduler.py:1 {_PREEMPT}", _PREEMPT, "WARNING")
    assert _read(f" {_PREEMPT}\n".encode()) == (Verdict.READY, Phase.READY, None)


def test_preemption_spoken_of_is_no_preemption() -> None:
    prose = "Preemption happens when there is not enough KV cache space."
    assert not serves_requests(prose, prose, "INFO")


# -- a request failed inside its handler (vllm/completions_answered_500_only) ---------------

_ACCESS = 'INFO:     10.0.0.2:5 - "{} HTTP/1.1" {}'


@pytest.mark.parametrize("route", ["POST /v1/chat/completions", "POST /generate"])
def test_a_request_posted_and_answered_500_reached_a_handler(route: str) -> None:
    assert SERVING.search(_ACCESS.format(route, "500 Internal Server Error")) is not None


@pytest.mark.parametrize(
    ("route", "status"),
    [
        ("POST /v1/chat/completions", "503 Service Unavailable"),
        ("POST /v1/chat/completions", "502 Bad Gateway"),
        ("GET /health", "500 Internal Server Error"),
        ("POST /health", "500 Internal Server Error"),
        ("GET /v1/models", "500 Internal Server Error"),
    ],
)
def test_refusals_and_health_checks_answered_5xx_prove_nothing(route: str, status: str) -> None:
    assert SERVING.search(_ACCESS.format(route, status)) is None


# -- the engine's word that its startup failed, cut where the line ends (field/sglang_
# initialization_failed_cut_in_a_wrapper_record) -------------------------------------------


@pytest.mark.parametrize(
    "message",
    [
        "Initialization failed. Please see the error messages above.",
        "[pid=9] Initialization failed. Pl",
        "Initialization failed. Please see the err",
        "Initialization failed. Please see the error messages abo  ",
    ],
)
def test_sglangs_initialization_failed_is_read_whole_or_cut_at_the_lines_end(message: str) -> None:
    match = match_signature(message)
    assert match is not None and match.reason is Reason.ENGINE_INIT and match.strong


@pytest.mark.parametrize(
    "message",
    [
        "Initialization failed. ",
        "Initialization failed. P",
        "Initialization failed. Please retry later",
        "Initialization failed. Pl ease",
    ],
)
def test_a_cut_must_keep_enough_words_and_end_the_line(message: str) -> None:
    assert match_signature(message) is None


# -- an accelerator's runtime out of memory or failing an operator (vllm/rbln_worker_kv_
# cache_blocks_do_not_fit, sglang/ascend_operator_call_failed_excerpt) ----------------------


def test_vllm_rblns_kv_cache_blocks_that_do_not_fit_are_an_oom_wherever_they_appear() -> None:
    words = "Not enough memory for 24 blocks of KV cache. Try reducing the number of blocks"
    match = match_signature(words)
    assert match is not None and match.reason is Reason.OOM and match.strong


@pytest.mark.parametrize(
    "line",
    [
        "RuntimeError: SYS_EBUSY: Lack of device memory. (code: -16)",
        "RuntimeError: SYS_ENOMEM: Out of memory",
    ],
)
def test_the_rbln_runtimes_memory_errors_name_an_oom_in_an_exception(line: str) -> None:
    match = match_signature(line)
    assert match is not None and match.reason is Reason.OOM and not match.strong
    assert _read(f"{line}\n".encode()) == (Verdict.FAILED, Phase.LAUNCHING, Reason.OOM)


_NPU = (
    "RuntimeError: gather_out:build/CMakeFiles/torch_npu.dir/compiler_depend.ts:41 NPU function "
    "error: call aclnnGather failed, error code is 561103"
)


def test_an_ascend_operator_call_failing_is_a_crash_while_starting() -> None:
    assert _read(f"{_NPU}\n".encode()) == (Verdict.FAILED, Phase.LAUNCHING, Reason.CRASH)


def test_an_ascend_operator_call_failing_after_ready_is_one_requests_error() -> None:
    ready = b"[2025-10-02 09:40:00] The server is fired up and ready to roll!\n"
    assert _read(ready + f"{_NPU}\n".encode())[0] is Verdict.READY


# -- vllm-omni's diffusion server coming up (vllm/omni_diffusion_api_server_starting) -------


@pytest.mark.parametrize(
    "words",
    ["Starting vLLM API server on http://0.0.0.0:8000", "Starting vLLM Diffusion API server on x"],
)
def test_vllm_and_vllm_omni_starting_their_api_server_is_http_up(words: str) -> None:
    log = f"INFO 03-05 11:19:22 [api_server.py:95] {words}\n".encode()
    assert _read(log) == (Verdict.STARTING, Phase.HTTP_UP, None)


def test_another_vllm_thing_starting_is_no_api_server() -> None:
    log = b"INFO 03-05 11:19:22 [x.py:1] Starting vLLM Diffusion worker 0\n"
    assert _read(log)[1] is not Phase.HTTP_UP


def test_the_engine_loops_record_behind_another_logging_format_is_the_same() -> None:
    line = "ERROR vllm:   [2024-03-20 04:18:14,123] -- /v/vllm/engine/async_llm_engine.py:68"
    assert engine_loop_died(line, "ERROR")
    assert not engine_loop_died('  File "/v/vllm/engine/async_llm_engine.py", line 68', "ERROR")


# -- SGLang retracting requests while decoding (sglang/decode_retracts_requests_excerpt) -----


def test_sglang_retracting_decoding_requests_shows_serving_and_no_failure() -> None:
    line = b"[2025-05-01 10:14:07 TP0] Decode out of memory happened. #retracted_reqs: 2, #n\n"
    assert _read(line) == (Verdict.READY, Phase.READY, None)


def test_sglangs_retraction_does_not_count_before_its_ready_line() -> None:
    head = b"[2025-05-01 10:10:00] server_args=ServerArgs(model_path='/m')\n"
    line = b"[2025-05-01 10:14:07 TP0] Decode out of memory happened. #retracted_reqs: 2\n"
    assert _read(head + line)[0] is Verdict.STARTING
