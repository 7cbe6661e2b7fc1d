"""Round six of the log reader's rules (issue 23): a new start after a stop or a failure is a
new story, and what a cut traceback's frames say about the phase and the cause.

Each rule also has a crafted fixture pair under tests/fixtures/logs (named in the section);
these tests pin the rule on the smallest input, including the ways it must not fire.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from firedup.logscan import EventKind, LogScanner, Phase, Reason, Verdict, explain
from firedup.logscan.rules import detect_engine, launch_banner
from firedup.ops.explain import explain_file, to_json, to_text


def _read(log: bytes) -> tuple[Verdict, Phase, Reason | None]:
    state = explain(log)
    return state.verdict, state.phase, state.reason


# == a new start is a new story (vllm/logo_banner_restart_after_stop_cut_loading,
#    vllm/logo_banner_restart_after_crash_ready, vllm/stopped_while_launching_then_relaunch_oom,
#    field/launcher_exception_quotes_the_banner_no_new_story) ================================

_LOGO = " ▄▄ ▄█ █     █     █ ▀▄▀ █  version 0.24.0"


@pytest.mark.parametrize(
    "message",
    [
        _LOGO,
        _LOGO.strip(),
        "▄▄ ▄█ █ █ █ ▀▄▀ █ version 0.19.0",  # a paste squeezed its blanks
        "vLLM API server version 0.6.4.post1",
        "vLLM server version 0.32.0, serving model /models/m",  # VLLM_DISABLE_LOG_LOGO
        "server_args=ServerArgs(model_path='m', port=30000)",
        "server_args={'model_path': 'm'}",
    ],
)
def test_the_engines_first_line_of_a_run_is_a_banner(message: str) -> None:
    assert launch_banner(message)


@pytest.mark.parametrize(
    "message",
    [
        "Starting vLLM API server on http://0.0.0.0:8000",  # printed once the engine is up
        "Starting vLLM server on http://0.0.0.0:8000",
        "       █     █     █▄   ▄█",  # the logo's other lines
        "  █▄█▀ █     █     █     █  model   /models/m",
        '    logger.info("vLLM API server version %s", VLLM_VERSION)',  # a traceback's code
        '    logger.info(f"{server_args=}")',
        "RuntimeError: failed with server_args=ServerArgs(model_path='m')",
    ],
)
def test_lines_that_only_mention_a_run_are_no_banner(message: str) -> None:
    assert not launch_banner(message)


def test_the_logo_names_vllm() -> None:
    assert detect_engine(_LOGO, "") is not None


def _vllm(pid: int, text: str, level: str = "INFO") -> bytes:
    return f"(APIServer pid={pid}) {level} 03-02 09:00:00 [x.py:1] {text}\n".encode()


_RUN = _vllm(1, _LOGO) + _vllm(1, "Starting to load model /models/m...")
_READY = (
    _vllm(1, "Starting vLLM server on http://0.0.0.0:8000")
    + b"INFO:     Application startup complete.\n"
)
_STOP = _vllm(1, "[shutdown] EngineCore: trigger received signal=SIGTERM") + (
    b"INFO:     Shutting down\nINFO:     Application shutdown complete.\n"
)
_RELAUNCH = _vllm(2, _LOGO) + _vllm(2, "Starting to load model /models/m...")


def test_a_restart_after_a_stop_is_read_as_the_new_run() -> None:
    state = explain(_RUN + _READY + _STOP + _RELAUNCH)
    assert (state.verdict, state.phase) == (Verdict.STARTING, Phase.LOADING_WEIGHTS)
    assert state.launches == 2
    assert state.earlier is not None
    assert (state.earlier.verdict, state.earlier.stopped) == (Verdict.READY, True)


def test_a_restart_that_comes_up_is_ready_and_the_earlier_failure_is_remembered() -> None:
    oom = _vllm(1, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 GiB", "ERROR")
    state = explain(_RUN + b"Traceback (most recent call last):\n" + oom + _RELAUNCH + _READY)
    assert (state.verdict, state.phase, state.reason) == (Verdict.READY, Phase.READY, None)
    assert state.earlier is not None
    assert (state.earlier.verdict, state.earlier.reason) == (Verdict.FAILED, Reason.OOM)
    assert state.earlier.phase is Phase.LOADING_WEIGHTS


def test_a_restart_after_a_silent_death_is_read_as_the_new_run() -> None:
    """A server killed without a word (SIGKILL) and started again by a supervisor."""
    state = explain(_RUN + _READY + _RELAUNCH)
    assert (state.verdict, state.phase) == (Verdict.STARTING, Phase.LOADING_WEIGHTS)
    assert state.earlier is not None
    assert (state.earlier.verdict, state.earlier.stopped) == (Verdict.READY, False)


def test_the_new_story_begins_with_a_launching_event_on_the_banner() -> None:
    scanner = LogScanner()
    events = scanner.feed(_RUN + _READY + _STOP + _RELAUNCH) + scanner.finish()
    launching = [e for e in events if e.kind is EventKind.PHASE and e.phase is Phase.LAUNCHING]
    assert len(launching) == 1 and "version 0.24.0" in launching[0].text


def test_a_stop_before_any_phase_does_not_swallow_the_relaunchs_failure() -> None:
    stop = _vllm(1, "[shutdown] EngineCore: trigger received signal=SIGINT")
    oom = _vllm(2, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 GiB", "ERROR")
    log = _vllm(1, _LOGO) + stop + _RELAUNCH + b"Traceback (most recent call last):\n" + oom
    assert _read(log) == (Verdict.FAILED, Phase.LOADING_WEIGHTS, Reason.OOM)


def test_one_launch_has_no_earlier_one() -> None:
    state = explain(_RUN + _READY)
    assert (state.launches, state.earlier) == (1, None)
    assert explain(_vllm(1, _LOGO) + _vllm(1, "vLLM API server version 0.11.0")).launches == 1


_FAILED = (
    b"2025-06-03 14:10:09,442 - INFO - launcher - INFO 06-03 14:10:09 api_server.py:712] "
    b"vLLM API server version 0.6.6\n"
    b"2025-06-03 14:10:11,002 - INFO - launcher - INFO 06-03 14:10:11 model_runner.py:1094] "
    b"Starting to load model /models/m...\n"
    b"Traceback (most recent call last):\n"
    b'  File "/srv/launcher/run.py", line 81, in main\n'
)


def test_a_banner_quoted_in_an_exception_message_starts_nothing() -> None:
    log = (
        _FAILED
        + b"RuntimeError: the server exited; its first lines:\nvLLM API server version 0.6.6\n"
    )
    assert _read(log) == (Verdict.FAILED, Phase.LOADING_WEIGHTS, Reason.CRASH)


def test_a_banner_inside_an_open_traceback_starts_nothing() -> None:
    log = _FAILED + b"vLLM API server version 0.6.6\n" + b"    main()\n"
    assert _read(log) == (Verdict.FAILED, Phase.LOADING_WEIGHTS, Reason.CRASH)


def test_a_banner_the_engine_logged_after_a_traceback_starts_the_new_run() -> None:
    relaunch = b"INFO 06-03 14:20:00 api_server.py:712] vLLM API server version 0.6.6\n"
    state = explain(_FAILED + b"RuntimeError: boom\n" + relaunch)
    assert (state.verdict, state.phase, state.launches) == (Verdict.STARTING, Phase.LAUNCHING, 2)


def test_in_a_log_with_no_prefixes_a_bare_banner_after_a_failure_starts_the_new_run() -> None:
    """Old SGLang printed its server_args bare: where no line has a prefix, none is needed."""
    log = (
        b"server_args=ServerArgs(model_path='m', port=30000)\n"
        b"Traceback (most recent call last):\n"
        b'  File "/x/sglang/srt/model_executor/model_runner.py", line 10, in load_model\n'
        b"RuntimeError: CUDA error: an illegal memory access was encountered\n"
        b"server_args=ServerArgs(model_path='m', port=30001)\n"
    )
    assert _read(log) == (Verdict.STARTING, Phase.LAUNCHING, None)


def test_explain_log_says_how_the_earlier_launch_ended(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(_RUN + _READY + _STOP + _RELAUNCH)
    explanation = explain_file(log)
    assert "2 launches in this log" in to_text(explanation)
    assert "was ready, then stopped" in " ".join(explanation.notes)
    assert '"launches": 2' in to_json(explanation)


# == labelling rules: a cut traceback's reason and a failed log's phase (docs/log-analysis.md,
#    "Labelling rules") =========================================================================

_CONSTRUCTION = (
    b'  File "/x/sglang/srt/managers/scheduler.py", line 250, in __init__\n'
    b"    self.tp_worker = TpModelWorker(\n"
    b'  File "/x/sglang/srt/model_executor/model_runner.py", line 310, in load_model\n'
    b'  File "/x/sglang/srt/model_loader/loader.py", line 371, in _initialize_model\n'
    b"    return model_class(\n"
)


@pytest.mark.parametrize(
    "head",
    [
        b"[2025-05-01 10:00:00] server_args=ServerArgs(model_path='m')\n"
        b"[2025-05-01 10:00:09 TP0] Scheduler hit an exception: Traceback (most recent call "
        b"last):\n",
        b"[2025-05-01 10:00:00] server_args=ServerArgs(model_path='m')\n"
        b"Traceback (most recent call last):\n",
    ],
    ids=["hit_an_exception", "bare_traceback"],
)
def test_a_traceback_cut_in_the_engines_construction_is_a_crash_not_engine_init(
    head: bytes,
) -> None:
    assert _read(head + _CONSTRUCTION) == (Verdict.FAILED, Phase.LAUNCHING, Reason.CRASH)


def test_the_engines_own_word_that_init_failed_is_engine_init() -> None:
    log = (
        b"ERROR 07-02 09:41:18 [core.py:396] EngineCore failed to start.\n"
        b"Traceback (most recent call last):\n" + _CONSTRUCTION
    )
    assert _read(log)[2] is Reason.ENGINE_INIT


def test_frames_of_the_serving_loop_do_not_move_a_failed_logs_phase() -> None:
    log = (
        b"[2025-05-01 10:00:00] server_args=ServerArgs(model_path='m')\n"
        b"[2025-05-01 11:00:00 TP0] Scheduler hit an exception: Traceback (most recent call "
        b"last):\n"
        b'  File "/x/sglang/srt/managers/scheduler.py", line 700, in event_loop_overlap\n'
        b'  File "/x/sglang/srt/managers/scheduler.py", line 900, in process_batch_result\n'
        b"RuntimeError: CUDA error: an illegal memory access was encountered\n"
    )
    assert _read(log) == (Verdict.FAILED, Phase.LAUNCHING, Reason.CRASH)
