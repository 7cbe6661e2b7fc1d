"""Round ten: the ninth blind part's misses, each read by the structure the released code
prints (SGLang 0.1.x-0.5.x, vLLM, CANN), never by the one line a log showed.

Each rule has a crafted fixture pair under tests/fixtures/logs (named per section); these
tests pin the rule on the smallest input, including the ways it must not fire.
"""

from __future__ import annotations

import pytest

from firedup.logscan import Phase, Reason, Verdict, explain
from firedup.logscan.normalize import parse_line

_SGLANG_START = b"[2025-09-14 08:00:01] server_args=ServerArgs(model_path='/m', tp_size=1)\n"
_VLLM_START = b"INFO 04-02 14:10:01 api_server.py:219] vLLM API server version 0.5.5\n"


def _read(log: bytes) -> tuple[Verdict, Phase, Reason | None]:
    state = explain(log)
    return state.verdict, state.phase, state.reason


# -- SGLang's OpenAI serving classes (sglang/openai_serving_error_in_request_mid_serving) -----

_BASE = '{i}File "/x/sglang/srt/entrypoints/openai/serving_base.py", line 51, in handle_request\n'
_CHAT = (
    '{i}File "/x/sglang/srt/entrypoints/openai/serving_chat.py", line 740, in '
    "_handle_non_streaming_request\n"
)


def _request_error(indent: str) -> bytes:
    return (
        "[2025-09-14 08:21:41] Error in request: bad tool call\n"
        "Traceback (most recent call last):\n"
        + _BASE.format(i=indent)
        + f"{indent}  return await self._handle_non_streaming_request(\n"
        + _CHAT.format(i=indent)
        + f"{indent}  response = self._build_chat_response(\n"
        "ValueError: bad tool call\n"
    ).encode()


@pytest.mark.parametrize("indent", ["  ", ""], ids=["indented", "indentation lost"])
def test_a_request_error_through_sglangs_openai_serving_base_mid_serving_is_ready(
    indent: str,
) -> None:
    assert _read(_request_error(indent)) == (Verdict.READY, Phase.READY, None)


def test_the_base_calling_the_requests_half_is_read_when_the_frame_was_cut() -> None:
    log = (
        b"[2025-09-14 08:21:41] Error in request: boom\n"
        b"Traceback (most recent call last):\n"
        b"    return await self._handle_streaming_request(\n"
        b"RuntimeError: boom\n"
    )
    assert _read(log)[0] is Verdict.READY


def test_sglangs_serving_base_after_its_startup_began_is_its_warm_up_not_a_proof() -> None:
    # A VLM's warm-up posts to /v1/chat/completions, through the same serving classes.
    log = _SGLANG_START + _request_error("  ")
    assert _read(log)[0] is Verdict.FAILED


def test_a_handle_request_frame_of_another_file_proves_nothing() -> None:
    log = (
        b"Traceback (most recent call last):\n"
        b'  File "/x/site-packages/somelib/server.py", line 9, in handle_request\n'
        b"    return self.run()\n"
        b"ValueError: bad\n"
    )
    assert _read(log)[0] is Verdict.FAILED


# -- the terminal's echo of a Ctrl-C (vllm/ctrl_c_echo_stops_a_hung_startup) ------------------

_HUNG = _VLLM_START + b"INFO 04-02 14:10:06 pynccl.py:63] vLLM is using nccl==2.20.5\n"
_CUT_TRACEBACK = (
    b"Traceback (most recent call last):\n"
    b'  File "/usr/lib/python3.10/asyncio/runners.py", line 44, in run\n'
    b"    return loop.run_until_complete(main)\n"
)


@pytest.mark.parametrize("echo", [b"^C\n", b"^C <second Ctrl-C>\n", b"^C^C\n"])
def test_a_ctrl_c_echoed_by_the_terminal_is_a_stop(echo: bytes) -> None:
    log = _HUNG + echo + _CUT_TRACEBACK
    assert _read(log) == (Verdict.STARTING, Phase.INIT_DISTRIBUTED, None)


def test_a_ctrl_c_named_in_prose_is_no_stop() -> None:
    log = _HUNG + b"INFO 04-02 14:10:07 launcher.py:9] press ^C to quit\n" + _CUT_TRACEBACK
    assert _read(log)[0] is Verdict.FAILED


def test_a_crash_before_the_ctrl_c_stays_a_crash() -> None:
    log = _HUNG + _CUT_TRACEBACK + b"RuntimeError: CUDA error: an illegal memory access\n^C\n"
    assert _read(log)[0] is Verdict.FAILED


# -- a request's constrained decoding (sglang/jump_forward_token_fusion_mid_serving) ---------

_FUSION = (
    b"[11:42:05 TP0] Token fusion between input and output, try to avoid this by removing the "
    b"space at the end of the input.\n"
)


@pytest.mark.parametrize(
    "line",
    [
        _FUSION,
        b"[11:42:06 TP0] prompt_tokens is larger than encoded all_ids\n",
        b"[11:42:06 TP0] Encoded all_text resulted in empty all_ids\n",
    ],
)
def test_jump_forward_warnings_mid_serving_show_a_ready_server(line: bytes) -> None:
    assert _read(line) == (Verdict.READY, Phase.READY, None)


def test_jump_forward_warnings_after_sglangs_startup_began_are_not_its_ready_line() -> None:
    assert _read(_SGLANG_START + _FUSION)[0] is Verdict.STARTING


# -- a collector's stamp around SGLang's (sglang/collector_stamp_around_sglang_stamp_...) ----


def test_a_bare_stamp_around_sglangs_own_is_peeled_with_it() -> None:
    line = parse_line(
        "[2025-05-20 09:30:12] [2025-05-20 14:30:12 TP3] Decode batch. #running-req: 3"
    )
    assert (line.message, line.ranks) == ("Decode batch. #running-req: 3", "TP3")
    assert line.stamp is not None and line.stamp[3] == 9  # the outer (collector's) time wins


def test_a_bracketed_time_in_an_sglang_message_is_kept() -> None:
    line = parse_line("[2025-05-20 14:30:12 TP0] [12:00:00] scheduled job ran")
    assert line.message == "[12:00:00] scheduled job ran"


def test_batches_behind_two_stamps_mid_serving_show_a_ready_server() -> None:
    log = b"[2025-05-20 09:30:12] [2025-05-20 14:30:12 TP0] Decode batch. #running-req: 3\n"
    assert _read(log) == (Verdict.READY, Phase.READY, None)


# -- SGLang's /generate answer pasted (sglang/generate_answer_json_pasted_mid_serving) --------


def test_sglangs_generate_answer_pasted_mid_serving_shows_a_ready_server() -> None:
    log = b'{"text": " Paris.", "meta_info": {"id": "9b1f", "prompt_tokens": 9}}\n'
    assert _read(log) == (Verdict.READY, Phase.READY, None)


@pytest.mark.parametrize(
    "line",
    [b'{"text": "hello"}\n', b'payload {"text": "", "meta_info": {"id": "1"}}\n'],
)
def test_other_json_with_text_proves_nothing(line: bytes) -> None:
    assert _read(line)[0] is Verdict.STARTING


# -- CANN's failed checks (vllm/ascend_cann_failed_checks_cut) ------------------------------

_ERR = "(Worker_DP0_TP2 pid=5133) ERROR 06-11 20:14:55 [multiproc_executor.py:671]        "


def _checks(*calls: str) -> bytes:
    return "".join(f"{_ERR}Check {call} failed\n" for call in calls).encode()


def test_a_log_ending_in_canns_failed_checks_failed() -> None:
    log = _checks("NnopbaseExecutorDoTiling(executor)", "NnopbaseRunForWorkspace(*e, size)")
    assert _read(log) == (Verdict.FAILED, Phase.LAUNCHING, Reason.CRASH)


def test_canns_checks_the_engine_logged_past_are_no_evidence() -> None:
    log = (
        _VLLM_START
        + _checks("NnopbaseExecutorDoTiling(executor)")
        + b"INFO 06-11 20:15:01 [gpu_model_runner.py:1] Starting to load model /m...\n"
    )
    assert _read(log)[0] is Verdict.STARTING


@pytest.mark.parametrize("line", ["Check the driver failed", "Check failed: x == y"])
def test_prose_about_failed_checks_is_no_frame(line: str) -> None:
    log = _VLLM_START + f"WARNING 06-11 20:14:55 [platform.py:9] {line}\n".encode()
    assert _read(log)[0] is Verdict.STARTING


# -- SGLang 0.1.x's launcher on its children (sglang/v01_router_init_state_traceback_cut) ----


@pytest.mark.parametrize(
    "line",
    [
        "router init state: Traceback (most recent call last):",
        "detoken init state: Traceback (most recent call last):",
        "Initialization failed. router_init_state: Traceback (most recent call last):",
    ],
)
def test_sglang_01s_init_state_other_than_ok_is_an_engine_init_failure(line: str) -> None:
    log = f"server started on [0.0.0.0]:10007\n{line}\n".encode()
    assert _read(log) == (Verdict.FAILED, Phase.LAUNCHING, Reason.ENGINE_INIT)


@pytest.mark.parametrize("line", ["detoken init state: init ok", "router_init_state: init ok"])
def test_an_init_state_that_is_ok_fails_nothing(line: str) -> None:
    assert _read(f"server started on [0.0.0.0]:10007\n{line}\n".encode())[0] is Verdict.STARTING


# -- SGLang 0.1.x's rank tags (sglang/v01_rank_tagged_ranks_load_weights_cut) ----------------


@pytest.mark.parametrize("tag", ["rank=1", "gpu_id=1"])
def test_sglang_01s_rank_tag_names_the_rank(tag: str) -> None:
    line = parse_line(f"[{tag}] Load weight begin.")
    assert (line.message, line.ranks) == ("Load weight begin.", tag)


def test_two_ranks_each_loading_are_one_load_not_a_draft() -> None:
    log = b"[rank=0] Load weight begin.\n[rank=1] Load weight begin.\n"
    assert _read(log) == (Verdict.STARTING, Phase.LOADING_WEIGHTS, None)


def test_sglang_01s_init_torch_is_the_distributed_init() -> None:
    assert _read(b"[rank=0] Init torch begin. Avail mem=39.20 GB\n")[1] is Phase.INIT_DISTRIBUTED


def test_a_gpu_tagged_decode_batch_mid_serving_still_shows_a_ready_server() -> None:
    assert _read(b"[gpu_id=0] Decode batch. #running-req: 1, #token: 40\n")[0] is Verdict.READY


# -- a loader's report of weights not in the checkpoint (sglang/diffusion_text_encoder_...) --


@pytest.mark.parametrize(
    "line",
    [
        "Following (allowed) text encoder weights were not initialized from checkpoint: ['a']",
        "Following model weights were not initialized from checkpoint: {'layers.0.w'}",
    ],
)
def test_a_loaders_report_of_weights_not_in_the_checkpoint_is_the_loading_phase(line: str) -> None:
    assert _read(f"{line}\n".encode()) == (Verdict.STARTING, Phase.LOADING_WEIGHTS, None)


def test_weights_not_initialized_named_in_prose_are_no_phase() -> None:
    line = b"Note: some optimizer state was not initialized from checkpoint; weights were fine\n"
    assert _read(line)[1] is Phase.LAUNCHING


# -- a wrapper's HTTP up before its engine (field/wrapper_uvicorn_up_before_engine_graph_...) -

_UVICORN_FIRST = (
    b"INFO:     Started server process [4242]\n"
    b"INFO:     Application startup complete.\n"
    b"INFO:     Uvicorn running on http://0.0.0.0:9000 (Press CTRL+C to quit)\n"
)
_CAPTURE_WAIT = (
    "Warning: Waiting for pending NCCL work to finish before starting graph capture. "
    "(function operator())"
)


@pytest.mark.parametrize(
    "prefix",
    ["[W CUDAGraph.cpp:145] ", "[rank1]:[W1103 13:19:43.194702705 compiler_depend.ts:149] "],
)
def test_torchs_capture_begin_warning_is_the_cuda_graph_phase(prefix: str) -> None:
    assert _read(f"{prefix}{_CAPTURE_WAIT}\n".encode())[1] is Phase.CUDA_GRAPH


def test_engine_lines_after_a_wrappers_http_came_up_first_are_the_story() -> None:
    log = _UVICORN_FIRST + b"INFO 03-02 10:01:20 model_runner.py:40] Loading weights took 9.1 GB\n"
    assert _read(log) == (Verdict.STARTING, Phase.LOADING_WEIGHTS, None)


def test_uvicorns_startup_alone_is_still_the_http_side_up() -> None:
    assert _read(_UVICORN_FIRST)[1] is Phase.HTTP_UP


def test_a_lagging_ranks_line_after_the_engines_own_http_does_not_drag_the_phase_back() -> None:
    log = (
        b"[2025-05-20 14:30:00 TP0] Load weight begin. avail mem=70.00 GB\n"
        b"[2025-05-20 14:31:00] INFO:     Started server process [77]\n"
        b"[2025-05-20 14:31:01 TP1] Load weight begin. avail mem=70.00 GB\n"
    )
    assert _read(log)[1] is Phase.HTTP_UP


# -- a Markdown code span or fence glued to the first line (field/markdown_fence_glued_...) --


@pytest.mark.parametrize("fence", ["`", "```"])
def test_a_fence_glued_to_a_frame_is_peeled(fence: str) -> None:
    line = parse_line(f'{fence}  File "/x/vllm/worker.py", line 3, in load_model')
    assert line.message == '  File "/x/vllm/worker.py", line 3, in load_model'


@pytest.mark.parametrize("fence", ["`", "```"])
def test_a_fence_glued_to_an_engine_record_is_peeled(fence: str) -> None:
    line = parse_line(f"{fence}[2025-01-01 10:00:00 TP0] Load weight begin.")
    assert (line.message, line.ranks) == ("Load weight begin.", "TP0")


def test_a_fence_line_of_its_own_and_a_backticked_word_stay_harmless() -> None:
    log = b"```\n`torch_dtype` is deprecated! Use `dtype` instead!\n```log\n"
    assert _read(log) == (Verdict.STARTING, Phase.LAUNCHING, None)


def test_the_innermost_frame_of_sglangs_openai_request_flow_alone_is_still_a_request() -> None:
    log = (
        b'  File "/x/sglang/srt/entrypoints/openai/serving_chat.py", line 785, in '
        b"_build_chat_response\n"
        b"    raise ValueError(\n"
        b"ValueError: Expected 2 output messages\n"
    )
    assert _read(log)[0] is Verdict.READY


def test_sglangs_openai_serving_class_built_at_startup_is_no_request() -> None:
    log = (
        b'  File "/x/sglang/srt/entrypoints/openai/serving_chat.py", line 122, in __init__\n'
        b"    self.use_dpsk_v32_encoding = self._use_dpsk_v32_encoding()\n"
        b"AttributeError: 'NoneType' object has no attribute 'architectures'\n"
    )
    assert _read(log)[0] is Verdict.FAILED


# -- SGLang's older record starts found further in a line (field/rank_tag_before_sglang_...) --


@pytest.mark.parametrize(
    "record",
    [
        "[09:14:02 TP0] Token fusion between input and output, try to avoid this.",
        "[gpu=0] Prefill batch. #new-seq: 1, #new-token: 311, #running-req: 57",
        "[gpu_id=0] Decode batch. #running-req: 60, #token: 30112",
    ],
)
@pytest.mark.parametrize("wrapper", ["[rank0]: ", "srun: ", "0: [rank0]: "])
def test_sglangs_older_records_behind_a_wrapper_on_number_only_lines_are_found(
    record: str, wrapper: str
) -> None:
    log = "".join(f"{wrapper}{record.replace('0', str(n), 1)}\n" for n in range(3))
    assert _read(log.encode())[0] is Verdict.READY


def test_a_bracketed_time_without_ranks_starts_no_record() -> None:
    log = b"[rank0]: job finished at [09:14:02] with status 0\n" * 2
    assert _read(log)[0] is Verdict.STARTING


def test_a_ray_tag_before_a_collectors_stamp_and_sglangs_is_peeled_too() -> None:
    line = parse_line(
        "(LLMServer pid=1200, ip=10.0.0.1) [2025-03-11 16:44:27] [2025-03-11 01:44:27 TP0] "
        "Decode batch. #running-req: 5"
    )
    assert (line.message, line.ranks) == ("Decode batch. #running-req: 5", "TP0")


# -- a bar's label is no wrapper (field/journal_wrapped_shard_bars_redrawn_per_line) ---------


def _bars(prefix: str) -> bytes:
    redraws = [(1, "18.30it/s"), (3, " 4.87it/s"), (5, " 4.21it/s")]
    return "".join(
        f"{prefix}Loading safetensors checkpoint shards:   {done}% Completed | {done}/97 "
        f"[00:00<00:05, {rate}]\n"
        for done, rate in redraws
    ).encode()


@pytest.mark.parametrize("prefix", ["Mar 04 09:12:02 node7 vllm[881]: ", "srun: ", "0: "])
def test_shard_bars_redrawn_on_lines_behind_a_prefix_are_all_read(prefix: str) -> None:
    state = explain(_bars(prefix))
    assert state.phase is Phase.LOADING_WEIGHTS
    assert state.progress is not None and (state.progress.done, state.progress.total) == (5, 97)


def test_tqdm_bars_behind_a_tag_are_read_too() -> None:
    log = b"".join(
        f"srun: Capturing CUDA graphs:  {p}%|##  | {n}/67 [00:0{n}<00:30, {r}it/s]\n".encode()
        for p, n, r in ((3, 2, "12.1"), (4, 3, " 9.8"), (6, 4, " 2.2"))
    )
    state = explain(log)
    assert state.phase is Phase.CUDA_GRAPH
    assert state.progress is not None and state.progress.done == 4


def test_a_ctrl_c_echoed_after_the_last_output_on_its_line_is_a_stop() -> None:
    hung = _VLLM_START + b"INFO 04-02 14:10:06 pynccl.py:63] vLLM is using nccl==2.20.5^C\n"
    assert _read(hung + _CUT_TRACEBACK) == (Verdict.STARTING, Phase.INIT_DISTRIBUTED, None)
