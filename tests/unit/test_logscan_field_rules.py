"""The rules that read field logs, each on a few lines shaped like the corpus's.

The fixture pairs in tests/fixtures/logs/field/ are the real logs these rules came from; the
lines here isolate one rule each, including the ways it must not fire.
"""

from __future__ import annotations

import time

from firedup.engine import Engine
from firedup.logscan import LogScanner, Phase, Reason, Verdict, explain
from firedup.logscan.normalize import engine_says, parse_line, split_records
from firedup.logscan.wrappers import Wrappers

RANK_TRACEBACK = b"""[rank0]: Traceback (most recent call last):
[rank0]:   File "/opt/venv/lib/python3.12/site-packages/vllm/_custom_ops.py", line 1054, in gemm
[rank0]:     return torch.ops._C.gptq_marlin_gemm(a, c, b_q_weight, b_scales,
[rank0]:            ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
[rank0]: RuntimeError: CUDA error: no kernel image is available for execution on the device
[rank0]: For debugging consider passing CUDA_LAUNCH_BLOCKING=1
"""


def test_a_prefix_repeated_on_consecutive_lines_is_peeled_whatever_its_shape() -> None:
    state = explain(RANK_TRACEBACK)
    assert (state.verdict, state.reason) == (Verdict.FAILED, Reason.NO_KERNEL_IMAGE)
    assert state.excerpt[-1].startswith("RuntimeError: CUDA error: no kernel image")


def test_the_ready_line_behind_a_learned_wrapper_is_seen() -> None:
    log = b"".join(
        b"worker-3 >> [2026-01-04 01:42:5%d TP0] %s\n" % (i, line)
        for i, line in enumerate(
            [
                b"Capture cuda graph end. Time elapsed: 5.37 s.",
                b"The server is fired up and ready to roll!",
            ]
        )
    )
    state = explain(log)
    assert (state.verdict, state.engine) == (Verdict.READY, Engine.SGLANG)


def test_a_learned_wrapper_never_eats_the_message_two_lines_share() -> None:
    wrappers = Wrappers()
    gloo = "[Gloo] Rank %d is connected to 1 peer ranks. Expected number of connected peer ranks: 1"
    assert wrappers.peel(gloo % 0) == gloo % 0
    assert wrappers.peel(gloo % 1) == gloo % 1
    state = explain(("\n".join(gloo % i for i in range(4)) + "\n").encode())
    assert (state.verdict, state.phase) == (Verdict.STARTING, Phase.INIT_DISTRIBUTED)


def test_an_engine_record_further_in_the_line_is_found() -> None:
    line = parse_line("vLLM STDOUT: INFO 07-05 14:58:17 [__init__.py:239] Automatically detected")
    assert (line.message, line.level, line.stamp) == (
        "Automatically detected",
        "INFO",
        (None, 7, 5, 14, 58, 17, 0),
    )
    quoted = parse_line("RuntimeError: failed (pid=7) see INFO 07-05 14:58:17 [a.py:1] x")
    assert quoted.message.startswith("RuntimeError"), "an exception line keeps its text"


def test_a_flattened_line_is_cut_into_its_records() -> None:
    flat = (
        '(APIServer pid=1)   File "/x.py", line 3, in f' + "(APIServer pid=1)     raise E()"
        "(APIServer pid=1) huggingface_hub.errors.RepositoryNotFoundError: 401 Client Error."
        " (APIServer pid=1) Repository Not Found for url: https://huggingface.co/x/y" + " " * 40
    )
    records = split_records(flat)
    assert [record.split(")", 1)[0] for record in records] == ["(APIServer pid=1"] * 4
    state = explain(flat.encode() + b"\n")
    assert (state.verdict, state.reason) == (Verdict.FAILED, Reason.MODEL_NOT_FOUND)
    assert split_records("(EngineCore pid=2) INFO 01-01 00:00:00 [a.py:1] one record " * 1) == [
        "(EngineCore pid=2) INFO 01-01 00:00:00 [a.py:1] one record "
    ]


def test_frames_without_their_header_make_the_exception_line_evidence() -> None:
    log = b"""  File "/usr/lib/python3/site-packages/huggingface_hub/_http.py", line 459, in raise_
    raise _format(RepositoryNotFoundError, message, response) from e
huggingface_hub.errors.RepositoryNotFoundError: 401 Client Error.
"""
    state = explain(log)
    assert state.reason is Reason.MODEL_NOT_FOUND
    assert state.excerpt[0].lstrip().startswith("File") and all(state.excerpt), state.excerpt


def test_a_bare_exception_line_counts_only_when_it_names_a_cause() -> None:
    named = (
        b"ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0.\n"
    )
    assert explain(named).reason is Reason.UNSUPPORTED_GPU
    assert explain(b"KeyError: 'text'\n").verdict is Verdict.STARTING


def test_a_hard_wrapped_message_is_read_joined() -> None:
    log = (
        b"[Rank 3] Process group watchdog thread terminated: [Rank 3] Watchdog caught colle\n"
        b"ctive operation timeout: WorkNCCL(SeqNum=4, OpType=BROADCAST) ran for 1800011 ms\n"
    )
    assert explain(log).reason is Reason.NCCL
    assert explain(log.split(b"\n")[1] + b"\n").verdict is Verdict.STARTING


def test_a_traceback_the_log_ends_in_fails_only_at_the_end_and_names_its_frames() -> None:
    log = b"""ERROR 07-02 07:04:46 [core.py:500] EngineCore failed to start.
ERROR 07-02 07:04:46 [core.py:500] Traceback (most recent call last):
ERROR 07-02 07:04:46 [core.py:500]   File "/v/cpp_extension.py", line 2506, in _run_ninja_build
ERROR 07-02 07:04:46 [core.py:500]     subprocess.run(
"""
    scanner = LogScanner()
    scanner.feed(log)
    assert scanner.state.reason is Reason.ENGINE_INIT  # the frames only hint, while alive
    scanner.finish()
    assert scanner.state.reason is Reason.JIT_BUILD
    cut = b'Traceback (most recent call last):\n  File "/cuda_graph_runner.py", line 9, in f\n'
    assert explain(cut).reason is Reason.CUDA_GRAPH_CAPTURE


def test_an_error_level_traceback_the_server_survives_is_no_failure() -> None:
    log = b"""INFO 01-01 10:00:00 [api_server.py:1] vLLM API server version 0.6.3
ERROR 01-01 10:00:01 [registry.py:1] Error in inspecting model architecture 'X'
ERROR 01-01 10:00:01 [registry.py:1] Traceback (most recent call last):
ERROR 01-01 10:00:01 [registry.py:1]   File "/v/registry.py", line 9, in _run_in_subprocess
ERROR 01-01 10:00:01 [registry.py:1]     returned.check_returncode()
INFO 01-01 10:00:05 [model_runner.py:1] Starting to load model /m...
INFO 01-01 10:00:40 [launcher.py:1] Available routes are:
INFO:     Application startup complete.
"""
    assert explain(log).verdict is Verdict.READY
    assert explain(log[: log.index(b"INFO:     Application")]).verdict is Verdict.STARTING


def test_a_warning_names_the_cause_of_the_generic_failure_after_it() -> None:
    log = b"""(Worker pid=3) WARNING 12-12 22:31:21 [w.py:3] No file list (invalid repository id)
(Worker pid=3) ERROR 12-12 22:31:21 [worker_base.py:275] Error executing method 'load_model'.
(Worker pid=3) ERROR 12-12 22:31:21 [worker_base.py:275] Traceback (most recent call last):
"""
    assert explain(log).reason is Reason.MODEL_NOT_FOUND


def test_serving_traffic_proves_ready_only_in_an_excerpt_or_from_vllm() -> None:
    traffic = (
        b'[2025-08-11 21:13:51] INFO:     10.0.0.2:5 - "POST /v1/completions HTTP/1.1" 200 OK\n'
    )
    assert explain(traffic).verdict is Verdict.READY
    unavailable = traffic.replace(b" 200 OK", b" 503 Service Unavailable")
    assert explain(unavailable).verdict is Verdict.STARTING
    sglang_warmup = (
        b"[2026-01-01 00:00:00] server_args=ServerArgs(model_path='/m')\n"
        b"[2026-01-01 00:01:00] INFO:     Uvicorn running on http://0.0.0.0:30000\n" + traffic
    )
    state = explain(sglang_warmup)
    assert (state.verdict, state.phase) == (Verdict.STARTING, Phase.HTTP_UP)
    asgi = b"ERROR:    Exception in ASGI application\nTraceback (most recent call last):\n"
    assert (
        explain(asgi + b"asyncio.exceptions.CancelledError: Cancelled\n").verdict is Verdict.READY
    )


def test_new_reasons_are_named_by_their_own_lines() -> None:
    cases = {
        b"usage: vllm [-h] [-v] {chat,complete,serve} ...\n": Reason.BAD_ARGS,
        b"vllm: error: unrecognized arguments: --omni\n": Reason.BAD_ARGS,
        b"Extension modules: numpy.core._multiarray_umath, torch._C (total: 2)\n": (
            Reason.FATAL_PYTHON_ERROR
        ),
        b'  File "/v/model_runner.py", line 1415 in execute_model\n': Reason.FATAL_PYTHON_ERROR,
        b"RuntimeError: Ninja build failed. Ninja output: ...\n": Reason.JIT_BUILD,
        b"ValueError: Model architectures ['Glm4ForCausalLM'] are not supported for now.\n": (
            Reason.UNSUPPORTED_MODEL
        ),
    }
    for line, reason in cases.items():
        assert explain(line).reason is reason, line


def test_a_tag_before_the_engines_line_is_learned_from_that_line() -> None:
    state = explain(
        b"0: ValueError: Bfloat16 is only supported on GPUs with compute capability 7.5\n"
    )
    assert state.verdict is Verdict.FAILED and state.reason is Reason.UNSUPPORTED_GPU
    # Once learned it peels every line that carries it, whatever follows.
    bars = (
        b"0: Traceback (most recent call last):\n"
        b"0: Loading safetensors checkpoint shards:  50% Completed | 1/2 [00:01<00:01,  1.00s/it]\n"
    )
    assert explain(bars).progress is not None
    # A tag before prose is left alone: `usage: ...` and `error: ...` keep their meaning.
    assert explain(b"usage: vllm serve [-h] [--model MODEL]\n").reason is Reason.BAD_ARGS


def test_the_kubelet_cri_stream_tag_is_peeled() -> None:
    line = parse_line("2026-05-02T10:00:45.5Z stdout F INFO:     Application startup complete.")
    assert line.message == "Application startup complete."


def test_a_usage_line_cut_inside_an_option_is_read_in_one_pass() -> None:
    # A paste hard-wraps argparse's usage mid-option; the bracketed-options row used to try
    # every way to split such a piece (exponential): this line took hours, and the node's wait
    # would have hung on it. A pass that ends at once is the only bound worth stating here.
    started = time.process_time()
    piece = " " * 21 + " ".join(f"[--option-{i} OPTION_{i}]" for i in range(30)) + " [--opti"
    assert explain(piece.encode() + b"\n").verdict is Verdict.STARTING
    assert time.process_time() - started < 1.0
    usage = b"   [--seed SEED] [--dtype {auto,half}] [--x [X ...]]\n"
    assert explain(usage).reason is Reason.BAD_ARGS


def test_the_first_line_is_read_with_the_wrapper_its_successor_teaches() -> None:
    log = (
        b"[rank0]: Extension modules: numpy.core._multiarray_umath, torch._C (total: 2)\n"
        b"[rank0]: Segmentation fault (core dumped)\n"
    )
    assert explain(log).reason is Reason.FATAL_PYTHON_ERROR
    scanner = LogScanner()
    scanner.feed(log[: log.index(b"\n") + 1])
    assert scanner.state.lines_seen == 1  # held, not lost: the next line decides its wrapper
    scanner.feed(log[log.index(b"\n") + 1 :])
    assert scanner.state.reason is Reason.FATAL_PYTHON_ERROR


def test_a_process_tag_is_a_wrapper_wherever_it_sits_among_them() -> None:
    line = parse_line("(ServeReplica pid=12, ip=10.0.0.1) vllm-1  | (EngineCore_DP0 pid=3) Boom")
    assert (line.message, line.ranks) == ("Boom", "EngineCore_DP0")
    alone = parse_line("vllm-1  | (EngineCore_DP0 pid=151) ")
    assert alone.text.strip() == "(EngineCore_DP0 pid=151)"


def test_the_tag_before_an_engine_record_is_peeled_from_bare_lines() -> None:
    wrappers = Wrappers(plain=None)
    record = "[rank0]: INFO 11-20 10:45:57 gpu_executor.py:102] # GPU blocks: 1"
    first = parse_line(record, None, wrappers.saw)
    assert first.message == "# GPU blocks: 1"
    assert parse_line("[rank0]: Killed", wrappers.peel, wrappers.saw).message == "Killed"


def test_a_hard_wrapped_frame_line_is_read_joined() -> None:
    log = (
        b'  File "/usr/local/lib/python3.10/dist-p\n'
        b'ackages/vllm/worker/worker.py", line 132, in init_device\n'
        b"    init_worker_distributed_environment(\n"
    )
    state = explain(log)
    assert (state.verdict, state.reason) == (Verdict.FAILED, Reason.CRASH)
    # A quoted path that is not a frame stays prose.
    assert explain(b'Loading File "/m/a\nb.json" done\n').verdict is Verdict.STARTING


def test_a_phase_line_wrapped_mid_word_is_read_joined_and_only_across_the_cut() -> None:
    head = b"(VllmWorker rank=0 pid=412) INFO 05-01 10:00:09 [gpu.py:1] Loading model wei"
    assert explain(head + b"\nghts took 14.99 GiB\n").phase is Phase.LOADING_WEIGHTS
    # A bare line after a short one is its own line; the marker must straddle the cut.
    assert explain(b"INFO 05-01 10:00:09 [x.py:1] Loading model wei\nghts took 1 GiB\n").phase is (
        Phase.LAUNCHING
    )


def test_a_learned_wrapper_is_peeled_repeated_and_blank_tagged_lines_teach_nothing() -> None:
    wrappers = Wrappers(plain=None)
    wrappers.peel("[rank0]: Traceback (most recent call last):")
    peeled = wrappers.peel('[rank0]: [rank0]: File "/e/x.py", line 5, in <module>')
    assert peeled == 'File "/e/x.py", line 5, in <module>'
    blank = Wrappers(plain=None)
    assert not blank.teaches("srun: ") and blank.peel("srun: ") == "srun: "
    log = b"srun: Fatal Python error: Segmentation fault\nsrun: \nsrun: \nsrun: Thread 0x7f (most"
    assert explain(log).reason is Reason.FATAL_PYTHON_ERROR


def test_a_wrapper_inside_a_learned_one_is_learned_from_what_it_leaves() -> None:
    wrappers = Wrappers(plain=engine_says)
    stamp = "srun: 2024-02-20 21:46:2{} | ERROR | stderr | "
    wrappers.peel(stamp.format(1) + "Traceback (most recent call last):")
    wrappers.peel(stamp.format(2) + "  File /v/x.py, in f")
    assert wrappers.peel(stamp.format(3) + "    g(self.model_config)") == "    g(self.model_config)"
    assert wrappers.strip(stamp.format(4) + "more") == "more"
