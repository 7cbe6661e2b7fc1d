"""Evidence shapes read from the third blind part's misses (each crafted, none copied): where
a traceback sits says whose failure it is.

Each rule also has a crafted fixture pair under tests/fixtures/logs (named in the test); these
tests pin the rule on the smallest input, including the ways it must not fire.
"""

from __future__ import annotations

from firedup.logscan import Phase, Reason, Verdict, explain
from firedup.logscan.harmless import asgi_frame
from firedup.logscan.normalize import parse_line
from firedup.logscan.signatures import SIGNATURES, match_signature

_ASGI = (
    b"Traceback (most recent call last):\n"
    b'  File "/srv/env/lib/python3.12/site-packages/uvicorn/protocols/http/httptools_impl.py",'
    b" line 401, in run_asgi\n"
    b"    result = await app(  # type: ignore[func-returns-value]\n"
    b'  File "/srv/env/lib/python3.12/site-packages/starlette/applications.py", line 112,'
    b" in __call__\n"
    b"    await self.middleware_stack(scope, receive, send)\n"
)


def _read(log: bytes) -> tuple[Verdict, Phase, Reason | None]:
    state = explain(log)
    return state.verdict, state.phase, state.reason


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
