"""Round nine: a stop is read as a stop, by the lines the engines print when one arrives
(SGLang 0.3-0.5.16, vLLM V0/V1 up to 0.32, uvicorn, Slurm), and what follows it is its noise;
an error before the stop still fails the run (order decides). A file hole ends one writer's
story. Each rule has a crafted fixture pair under tests/fixtures/logs (named in the test);
these tests pin it on the smallest input, including the ways it must not fire.
"""

from __future__ import annotations

import pytest

from firedup.engine import Engine
from firedup.logscan import LogScanner, Phase, Reason, Verdict, explain
from firedup.logscan.context import HOLE, is_stop, signalled

SGL_LOADING = (
    b"[2026-05-04 09:00:01] server_args=ServerArgs(model_path='/m', port=30000, tp_size=2)\n"
    b"[2026-05-04 09:00:11 TP0] Load weight begin. avail mem=78.12 GB\n"
)
SGL_UP = SGL_LOADING + (
    b"[2026-05-04 09:00:20 TP0] KV Cache is allocated. #tokens: 861234, K size: 29.57 GB\n"
    b"[2026-05-04 09:00:31] INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C)\n"
)
SGL_READY = SGL_UP + b"[2026-05-04 09:00:34] The server is fired up and ready to roll!\n"
VLLM_READY = (
    b"INFO 05-02 10:00:00 [api_server.py:1043] vLLM API server version 0.10.1\n"
    b"INFO 05-02 10:00:41 [api_server.py:1100] Starting vLLM API server on http://0.0.0.0:8000\n"
    b"INFO:     Application startup complete.\n"
)
WATCHDOG = b"[2026-05-04 09:07:00] Subprocess detokenizer (pid=7044) crashed with exit code %d. Triggering SIGQUIT for cleanup...\n"  # noqa: E501
SIGQUIT = b"[2026-05-04 09:07:00] SIGQUIT received. signum=3, frame=None. It usually means one child failed.\n"  # noqa: E501


def _read(log: bytes) -> tuple[Verdict, Phase, Reason | None]:
    state = explain(log)
    return state.verdict, state.phase, state.reason


@pytest.mark.parametrize(
    "line",
    [
        # SGLang's tokenizer manager (0.3.x to 0.5.16), its drain, and its gRPC server
        "SIGTERM received. signum=None frame=None. Draining requests and shutting down...",
        "Gracefully exiting... Remaining number of requests 2. Remaining requests rids=[]",
        "Signal SIGTERM received while health check failed. Force exiting.",
        # vLLM: the launcher, the EngineCore (0.32), Ctrl-C or a SIGTERM during startup
        "Received SIGTERM, shutting down",
        "[shutdown] EngineCore: trigger received signal=SIGTERM",
        "KeyboardInterrupt",
        "KeyboardInterrupt: terminated",
        "Received KeyboardInterrupt, shutting down API servers...",
        "KeyboardInterrupt: MQLLMEngine terminated",  # V0's engine process on SIGTERM
        "Shutting down FastAPI HTTP server.",  # 0.8-0.11: its signal handler cancelled it
        "[shutdown] API server: shutting down FastAPI HTTP server",
        # Slurm cancelling the job or step, srun on Ctrl-C; the shell reporting a TERMed child
        "slurmstepd: error: *** JOB 81234 ON gpu-a12 CANCELLED AT 2026-05-04T10:00:27 ***",
        "*** STEP 81234.0 ON gpu-a12 CANCELLED AT 2026-05-04T10:00:27 DUE TO TIME LIMIT ***",
        "srun: sending Ctrl-C to StepId=81234.0",
        "launch.sh: line 12: 40123 Terminated              python -m sglang.launch_server",
    ],
)
def test_a_stop_asked_for_is_read_at_any_time(line: str) -> None:
    assert is_stop(line, ready=False)


def test_a_childs_death_by_a_stop_signal_is_read_from_its_exit_code() -> None:
    # SGLang's watchdog: its own clean-up kills with SIGKILL, so -15/-2 came from outside
    watchdog = "Subprocess scheduler_0 (pid=7012) crashed with exit code %d. Triggering SIGQUIT"
    assert signalled(watchdog % -15, ready=False) and signalled(watchdog % -2, ready=False)
    assert not signalled(watchdog % -9, ready=True) and not signalled(watchdog % -6, ready=True)
    report = "Worker proc VllmWorker-1 died unexpectedly (exit code: -15), shutting down executor"
    assert signalled(report, ready=True) and not signalled(report, ready=False)


@pytest.mark.parametrize(
    "line",
    [
        "Received sigquit from a child process. It usually means the child failed.",
        "SIGQUIT received. signum=3, frame=None. It usually means one child failed.",
        "Subprocess scheduler_0 (pid=7012) crashed with exit code -9. Triggering SIGQUIT...",
        "Subprocess scheduler_0 (pid=7012) crashed with exit code -6. Triggering SIGQUIT...",
        "*** JOB 81234 ON gpu-a12 CANCELLED AT 2026-05-04T10:00:27 DUE TO NODE FAILURE ***",
        "Worker VllmWorkerProcess pid 8773 died, exit code: -15",  # vLLM's own clean-up TERMs
        "Subprocess scheduler_0 (pid=7012) crashed with exit code -15.",  # signalled(), below
        "srun: Job step aborted: Waiting up to 32 seconds for job step to finish.",  # a task's
        "srun: forcing job termination",  # failure ends the step with these lines too
        "Shutting down",  # uvicorn's, before its own startup: cannot be
        "[shutdown] MPClient: engine core exited unexpectedly; starting cleanup",
        "A KeyboardInterrupt handler was registered",
    ],
)
def test_what_is_no_stop_while_starting(line: str) -> None:
    assert not is_stop(line, ready=False)


def test_uvicorn_shutdown_is_a_stop_once_the_http_side_is_up() -> None:
    # sglang/sigterm_during_warmup_uvicorn_shutdown_then_warmup_error
    assert is_stop("Shutting down", ready=False, http_up=True)
    assert is_stop("Finished server process [7001]", ready=False, http_up=True)
    assert not is_stop("[shutdown] API server: engine client stopped", ready=False, http_up=True)
    warmup = b"[2026-05-04 09:00:33] Initialization failed. warmup error: Traceback\n"
    stop = b"[2026-05-04 09:00:32] INFO:     Shutting down\n"
    assert _read(SGL_UP + stop + warmup) == (Verdict.STARTING, Phase.HTTP_UP, None)
    assert _read(SGL_UP + warmup)[2] is Reason.WARMUP_FAILED


def test_vllm_fastapi_shutdown_is_the_stop_its_engine_death_follows() -> None:
    # vllm/v010_ctrl_c_after_ready_fastapi_shutdown_then_engine_core_died
    stop = b"INFO 05-04 10:04:00 [launcher.py:101] Shutting down FastAPI HTTP server.\n"
    died = b"ERROR 05-04 10:04:00 [core_client.py:562] Engine core proc EngineCore_0 died unexpectedly, shutting down client.\n"  # noqa: E501
    assert _read(VLLM_READY + stop + died)[0] is Verdict.READY
    assert _read(VLLM_READY + died + stop)[0] is Verdict.FAILED  # the death came first


def test_a_childs_death_by_sigterm_after_ready_is_the_stop() -> None:
    # vllm/stop_after_ready_worker_died_exit_15_before_shutdown_line
    died = b"ERROR 05-02 11:09:00 [multiproc_executor.py:316] Worker proc VllmWorker-1 died unexpectedly (exit code: %d), shutting down executor.\n"  # noqa: E501
    assert _read(VLLM_READY + died % -15)[0] is Verdict.READY
    assert _read(VLLM_READY + died % -2)[0] is Verdict.READY
    assert _read(VLLM_READY + died % -11) == (Verdict.FAILED, Phase.READY, Reason.CRASH)
    assert _read(VLLM_READY + died % -9)[2] is Reason.KILLED
    # while starting, vLLM's own clean-up TERMs its workers after a failure: still a failure
    starting = b"INFO 05-02 10:00:00 [api_server.py:1043] vLLM API server version 0.10.1\n"
    assert _read(starting + died % -15)[0] is Verdict.FAILED


def test_sglang_stopped_by_sigterm_is_no_crash_and_a_crash_before_it_stays_one() -> None:
    # sglang/sigterm_while_serving_watchdog_child_exit_15, ..._during_capture_..._only
    sigterm = b"[2026-05-04 09:07:00] SIGTERM received. signum=None frame=None. Draining requests and shutting down...\n"  # noqa: E501
    assert _read(SGL_READY + sigterm + WATCHDOG % -15 + SIGQUIT)[0] is Verdict.READY
    assert _read(SGL_LOADING + WATCHDOG % -15 + SIGQUIT) == (
        Verdict.STARTING,
        Phase.LOADING_WEIGHTS,
        None,
    )
    # a child killed (the OOM killer) or aborting is a failure, whatever follows
    assert _read(SGL_READY + WATCHDOG % -9 + sigterm)[2] is Reason.KILLED
    assert _read(SGL_LOADING + WATCHDOG % -6 + SIGQUIT)[2] is Reason.CRASH
    # the error came first: the children's -15 after it is the clean-up's
    hit = b"[2026-05-04 09:00:12 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"  # noqa: E501
    assert _read(SGL_LOADING + hit + WATCHDOG % -15)[0] is Verdict.FAILED


ANNOUNCED = (
    b"Process SpawnProcess-1:\n"
    b"Traceback (most recent call last):\n"
    b'  File "/usr/lib/python3.12/multiprocessing/process.py", line 314, in _bootstrap\n'
    b"    self.run()\n"
)


def test_a_process_announcing_its_traceback_died_as_the_traceback_ends() -> None:
    # sglang/ctrl_c_during_load_children_announce_keyboardinterrupt
    assert _read(SGL_LOADING + ANNOUNCED + b"KeyboardInterrupt\n")[0] is Verdict.STARTING
    failed = _read(SGL_LOADING + ANNOUNCED + b"RuntimeError: CUDA error: invalid argument\n")
    assert failed == (Verdict.FAILED, Phase.LOADING_WEIGHTS, Reason.CRASH)
    oom = b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
    assert _read(SGL_LOADING + ANNOUNCED + oom)[2] is Reason.OOM
    # after ready it is a dying process, not one request's error; cut, it is still one
    assert _read(SGL_READY + ANNOUNCED + b"ValueError: bad\n")[0] is Verdict.FAILED
    assert _read(SGL_READY + ANNOUNCED)[0] is Verdict.FAILED
    assert _read(SGL_READY + b"Process SpawnProcess-1:\n")[0] is Verdict.FAILED
    state = explain(SGL_LOADING + ANNOUNCED + b"ValueError: bad\n")
    assert state.excerpt[0] == "Process SpawnProcess-1:" and state.excerpt[-1] == "ValueError: bad"


def test_ctrl_c_or_sigterm_during_startup_is_a_stop_not_a_kill() -> None:
    # sglang/keyboard_interrupt_during_load, vllm/sigterm_during_load_keyboardinterrupt_terminated
    tb = b'Traceback (most recent call last):\n  File "/x/launch_server.py", line 14, in <module>\n'
    assert _read(SGL_LOADING + tb + b"KeyboardInterrupt\n")[0] is Verdict.STARTING
    dead = b"ERROR 05-04 10:00:28 [multiproc_executor.py:149] Worker proc VllmWorker-1 died unexpectedly, shutting down executor.\n"  # noqa: E501
    terminated = SGL_LOADING + tb + b"KeyboardInterrupt: terminated\n" + dead
    assert _read(terminated)[0] is Verdict.STARTING
    # an error before the Ctrl-C is still the failure, and the Ctrl-C names no cause for it
    oom = b"torch.OutOfMemoryError: CUDA out of memory.\n"
    assert _read(SGL_LOADING + tb + oom + tb + b"KeyboardInterrupt\n")[2] is Reason.OOM
    init = b"ERROR 05-04 10:00:28 [core.py:700] EngineCore failed to start.\n"
    assert _read(SGL_LOADING + init + tb + b"KeyboardInterrupt\n")[2] is Reason.ENGINE_INIT


def test_slurm_cancelling_the_job_stops_the_run() -> None:
    # field/slurm_job_cancelled_during_startup_then_engine_init_failed
    cancel = b"slurmstepd: error: *** STEP 81234.0 ON a12 CANCELLED AT 2026-05-04T10:00:27 ***\n"
    died = b"RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {'EngineCore_0': -15}\n"  # noqa: E501
    assert _read(SGL_LOADING + cancel + died)[0] is Verdict.STARTING
    assert _read(SGL_LOADING + died)[2] is Reason.ENGINE_INIT
    node = cancel.replace(b" ***", b" DUE TO NODE FAILURE ***")
    assert _read(SGL_LOADING + node + died)[0] is Verdict.FAILED


SERVING = (
    b"[2026-05-04 12:00:05 TP0] Decode batch, #running-req: 3, #token: 1880, token usage: 0.01, gen throughput (token/s): 241.70, #queue-req: 0,\n"  # noqa: E501
    b'[2026-05-04 12:00:05] INFO:     10.0.0.9:6012 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'
)
FAILED_LAUNCH = (
    b"[2026-05-04 12:00:01] server_args=ServerArgs(model_path='/m', port=30000)\n"
    b"OSError: [Errno 98] error while attempting to bind on address: address already in use\n"
)


@pytest.mark.parametrize("chunk", [1, 4096, 1 << 20])
def test_what_follows_a_file_hole_is_a_later_writers_story(chunk: int) -> None:
    # field/overwritten_by_failed_second_launch_nul_hole_then_serving
    for hole in (HOLE, HOLE * 100):  # shorter than a segment's bound, and longer
        scanner = LogScanner()
        data = FAILED_LAUNCH + hole + SERVING
        for at in range(0, len(data), chunk):
            scanner.feed(data[at : at + chunk])
        scanner.finish()
        assert scanner.state.verdict is Verdict.READY


def test_a_hole_at_the_end_or_a_few_nuls_change_nothing() -> None:
    assert _read(FAILED_LAUNCH + HOLE)[2] is Reason.PORT_IN_USE
    assert _read(FAILED_LAUNCH + b"\0" * 200 + SERVING)[2] is Reason.PORT_IN_USE


@pytest.mark.parametrize(
    ("exception", "probe"),
    [
        (
            "requests.exceptions.HTTPError: 503 Server Error: Service Unavailable for url: "
            "http://sglang-0.sglang:30000/health",
            True,
        ),
        (
            "requests.exceptions.ConnectionError: HTTPConnectionPool(host='localhost', "
            "port=30000): Max retries exceeded with url: /v1/models (Caused by NewConnection"
            "Error('Failed to establish a new connection: [Errno 111] Connection refused'))",
            True,
        ),
        ("urllib.error.HTTPError: HTTP Error 503: Service Unavailable", True),
        (
            "httpx.HTTPStatusError: Server error '503 Service Unavailable' for url "
            "'http://127.0.0.1:8000/health'",
            True,
        ),
        # a download's error is the server's own failure to start
        (
            "requests.exceptions.HTTPError: 503 Server Error: Service Unavailable for url: "
            "https://huggingface.co/api/models/Qwen/Qwen3-8B/revision/main",
            False,
        ),
        ("OSError: [Errno 98] error while attempting to bind: address already in use", False),
    ],
)
def test_a_readiness_probes_error_is_not_the_servers(exception: str, probe: bool) -> None:
    # field/ci_job_health_probe_503_traceback_then_sglang_ready
    tb = b'Traceback (most recent call last):\n  File "/ci/wait.py", line 21, in <module>\n'
    verdict = _read(SGL_UP + tb + exception.encode() + b"\n")[0]
    assert (verdict is Verdict.STARTING) is probe


def test_our_own_stop_of_sglang_reads_exited_from_the_log_alone() -> None:
    # `fab stop` TERMs the run's process group (node/sh/stop.sh): SGLang 0.5.16 then logs its
    # SIGTERM line, its watchdog's `crashed with exit code -15` and the SIGQUIT clean-up. The
    # log alone says the run went away, not that it failed; `fab status` says `stopped` from
    # the history (status_of).
    from firedup.node.probe import Probe
    from firedup.ops.status import RunState, state_of

    sigterm = b"[2026-05-04 09:07:00] SIGTERM received. signum=None frame=None. Draining requests and shutting down...\n"  # noqa: E501
    scanner = LogScanner(Engine.SGLANG)
    scanner.feed(SGL_READY + sigterm + WATCHDOG % -15 + SIGQUIT)
    gone = Probe(1.0, 100, frozenset(), (), True, 0, b"", None)
    assert state_of(gone, scanner.state) is RunState.EXITED
