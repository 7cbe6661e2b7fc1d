"""Round twelve (blind11's misses): what a graph capture's frames say once its exception is
read, and the interpreter's own word that `python -m MODULE` never ran. Each rule has a crafted
fixture pair under tests/fixtures/logs (named in the test); these tests pin it on the smallest
input, including the ways it must not fire.
"""

from __future__ import annotations

import pytest

from firedup.logscan import Phase, Reason, Verdict
from tests.unit.test_logscan_shapes import _read
from tests.unit.test_logscan_stops import VLLM_READY

SGL_CAPTURING = (
    b"[2026-03-09 11:02:17] server_args=ServerArgs(model_path='/m', tp_size=1, port=30000)\n"
    b"[2026-03-09 11:02:28 TP0] Load weight begin. avail mem=78.40 GB\n"
    b"[2026-03-09 11:03:52 TP0] KV Cache is allocated. #tokens: 402117, K size: 17.25 GB\n"
    b"[2026-03-09 11:03:52 TP0] Capture cuda graph begin. This can take up to several minutes.\n"
    b"[2026-03-09 11:03:53 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
    b'  File "/x/sglang/srt/model_executor/cuda_graph_runner.py", line 361, in __init__\n'
    b"    self.capture()\n"
    b'  File "/x/sglang/srt/models/m.py", line 488, in forward\n'
    b"    out = self.mlp(hidden_states)\n"
)
SIGQUIT = b"[2026-03-09 11:03:53] Received sigquit from a child process. It usually means the child failed.\n"  # noqa: E501


@pytest.mark.parametrize(
    "exception",
    [
        "AttributeError: 'MoeRouter' object has no attribute 'gate_proj'",
        "TypeError: cannot unpack non-iterable AttnMetadata object",
        "KeyError: 'layers.3.mlp'",
        "builtins.NameError: name 'kv_indptr' is not defined",
        "AssertionError",
    ],
)
def test_a_bug_in_the_code_a_capture_ran_is_a_crash_not_the_capture(exception: str) -> None:
    """SGLang wraps only a RuntimeError raised while capturing as `Capture cuda graph failed`
    (cuda_graph_runner.py): Python's own other exceptions pass through raw and name a bug
    (fixture sglang/capture_raw_attributeerror_in_model_code)."""
    log = SGL_CAPTURING + exception.encode() + b"\n\n" + SIGQUIT
    assert _read(log) == (Verdict.FAILED, Phase.CUDA_GRAPH, Reason.CRASH)


@pytest.mark.parametrize(
    "tail",
    [
        b"RuntimeError: CUDA error: operation failed due to a previous error during capture\n\n"
        + SIGQUIT,
        b"Exception: graph replay buffer mismatch\n\n" + SIGQUIT,  # what a wrapper raises
        b"torch.AcceleratorError: CUDA error: unspecified launch failure\n\n" + SIGQUIT,
        b"",  # cut inside the capture's frames
    ],
)
def test_a_capture_that_failed_in_the_runtime_is_still_the_capture(tail: bytes) -> None:
    assert _read(SGL_CAPTURING + tail) == (
        Verdict.FAILED,
        Phase.CUDA_GRAPH,
        Reason.CUDA_GRAPH_CAPTURE,
    )


@pytest.mark.parametrize(
    "line",
    [
        "/srv/app/.venv/bin/python3.12: Error while finding module specification for "
        "'vllm.entrypoints.openai.api_server' (ModuleNotFoundError: No module named 'vllm')",
        "/usr/bin/python3: No module named sglang",
        r"C:\Users\me\venv\Scripts\python.exe: No module named vllm.entrypoints.openai.api_server",
        "/opt/conda/bin/python: No module named sglang.__main__; 'sglang' is a package and "
        "cannot be directly executed",
    ],
)
def test_the_interpreter_that_could_not_run_the_module_failed_the_launch(line: str) -> None:
    """CPython's runpy prints `<sys.executable>: <error>` and exits 1 when `python -m MODULE`
    cannot start (fixture field/python_m_module_not_found_before_launch)."""
    assert _read(line.encode() + b"\n") == (Verdict.FAILED, Phase.LAUNCHING, Reason.CRASH)


@pytest.mark.parametrize(
    "line",
    [
        "ModuleNotFoundError: No module named 'vllm'",  # an exception line alone is prose
        "WARNING: No module named 'flash_attn', falling back to the torch kernels",
        "python: No module named foo was found by the plugin loader, skipping it",
    ],
)
def test_other_lines_naming_a_missing_module_fail_nothing(line: str) -> None:
    assert _read(line.encode() + b"\n")[0] is Verdict.STARTING


def test_after_ready_the_interpreter_report_is_not_the_server() -> None:
    """Another `python -m` run failing in the same log after ready is not this server's."""
    log = VLLM_READY + b"/usr/bin/python3: No module named benchmark_serving\n"
    assert _read(log)[0] is Verdict.READY


def test_a_refused_setup_step_before_the_engine_banner_is_an_earlier_launch() -> None:
    """A launcher script's own `python -m` step failing before the engine's banner is the
    launch before it: the engine's run that follows is what the log is judged by."""
    log = (
        b"/usr/bin/python3: No module named pip\n"
        b"[2026-05-04 09:00:01] server_args=ServerArgs(model_path='/m', port=30000, tp_size=1)\n"
        b"[2026-05-04 09:00:11 TP0] Load weight begin. avail mem=78.12 GB\n"
        b"[2026-05-04 09:00:34] The server is fired up and ready to roll!\n"
    )
    assert _read(log) == (Verdict.READY, Phase.READY, None)
