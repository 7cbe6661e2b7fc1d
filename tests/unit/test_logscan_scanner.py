"""The classifier's rules, each shown on a few lines of log."""

from __future__ import annotations

from datetime import datetime

from firedup.engine import Engine
from firedup.logscan import (
    HINTS,
    EventKind,
    LogScanner,
    Phase,
    Progress,
    Reason,
    Verdict,
    explain,
)
from firedup.logscan.segments import MAX_SEGMENT_BYTES
from firedup.logscan.signatures import SIGNATURES

BAR0 = b"\rCapturing batches (bs=48 avail_mem=21.50 GB):   0%|          | 0/23 [00:00<?, ?it/s]"
SGLANG_HEALTHY = (
    b"""[2026-02-22 23:41:02] server_args=ServerArgs(model_path='/m', tp_size=2)
[2026-02-22 23:41:10 TP0] Init torch distributed begin.
[2026-02-22 23:41:10 TP1] Init torch distributed begin.
[2026-02-22 23:41:12 TP0] Load weight begin. avail mem=78.00 GB
[2026-02-22 23:41:12 TP1] Load weight begin. avail mem=78.00 GB
[2026-02-22 23:42:12 TP0] Load weight end. elapsed=60 s, type=DeepseekV3ForCausalLM, avail mem=9 GB
[2026-02-22 23:42:13 TP0] KV Cache is allocated. #tokens: 1000, KV size: 5.00 GB
[2026-02-22 23:42:13 TP1] Load weight end. elapsed=61 s, type=DeepseekV3ForCausalLM, avail mem=9 GB
[2026-02-22 23:42:14 TP0] Capture cuda graph begin. This can take up to several minutes.
[2026-02-22 23:42:15 TP1] Memory pool end. avail mem=3.00 GB
[2026-02-22 23:42:54 TP0] Capture cuda graph end. Time elapsed: 40.12 s.
[2026-02-22 23:42:55 TP0] Load weight begin. avail mem=3.00 GB
[2026-02-22 23:42:57 TP0] Load weight end. elapsed=2 s, type=LlamaForCausalLMEagle3, avail mem=2 GB
[2026-02-22 23:42:58 TP0] Capture draft cuda graph begin. This can take up to several minutes.
"""
    + BAR0
    + b"""\r\n[2026-02-22 23:43:40 TP0] Capture draft cuda graph end. Time elapsed: 42 s.
[2026-02-22 23:43:41] INFO:     Application startup complete.
[2026-02-22 23:43:41] INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)
[2026-02-22 23:43:42] INFO:     127.0.0.1:40012 - "GET /model_info HTTP/1.1" 200 OK
[2026-02-22 23:43:55] The server is fired up and ready to roll!
"""
)


def test_healthy_sglang_walks_the_phases_in_order_with_times() -> None:
    scanner = LogScanner()
    events = scanner.feed(SGLANG_HEALTHY) + scanner.finish()
    phases = [event.phase for event in events if event.kind is EventKind.PHASE]
    assert phases == [
        Phase.INIT_DISTRIBUTED,
        Phase.LOADING_WEIGHTS,
        Phase.KV_CACHE,
        Phase.CUDA_GRAPH,
        Phase.DRAFT_LOADING,
        Phase.DRAFT_CUDA_GRAPH,
        Phase.HTTP_UP,
        Phase.WARMUP,
        Phase.READY,
    ]
    assert [event.kind for event in events].count(EventKind.READY) == 1
    state = scanner.state
    assert (state.verdict, state.phase, state.engine) == (Verdict.READY, Phase.READY, Engine.SGLANG)
    spans = {span.phase: span for span in state.phases}
    assert spans[Phase.LOADING_WEIGHTS].duration_s == 61.0
    assert spans[Phase.DRAFT_CUDA_GRAPH].start == datetime(2026, 2, 22, 23, 42, 58)
    assert spans[Phase.READY].end is None


def test_a_rank_that_lags_does_not_drag_the_phase_back_or_fake_a_draft() -> None:
    # TP1's "Load weight end" after TP0's KV cache line is the target load, not the draft.
    cut = SGLANG_HEALTHY.index(b"[2026-02-22 23:42:14 TP0] Capture")
    state = explain(SGLANG_HEALTHY[:cut])
    assert state.phase is Phase.KV_CACHE


def test_the_0_of_23_bar_is_progress_even_before_its_line_ends() -> None:
    cut = SGLANG_HEALTHY.index(BAR0) + len(BAR0)
    scanner = LogScanner()
    events = scanner.feed(SGLANG_HEALTHY[:cut])
    state = scanner.state
    assert (state.verdict, state.phase) == (Verdict.STARTING, Phase.DRAFT_CUDA_GRAPH)
    assert state.progress == Progress("Capturing batches (bs=48 avail_mem=21.50 GB)", 0, 23)
    assert not [event for event in events if event.kind is EventKind.FATAL]


def test_port_open_is_http_up_not_ready() -> None:
    cut = SGLANG_HEALTHY.index(b"[2026-02-22 23:43:42] INFO:     127.0.0.1")
    state = explain(SGLANG_HEALTHY[:cut])
    assert (state.verdict, state.phase) == (Verdict.STARTING, Phase.HTTP_UP)


def test_vllm_application_startup_complete_is_ready_only_for_vllm() -> None:
    line = b"(APIServer pid=1) INFO:     Application startup complete.\n"
    assert explain(line).verdict is Verdict.READY  # the APIServer prefix names the engine
    bare = b"INFO:     Application startup complete.\n"
    assert explain(bare).phase is Phase.HTTP_UP
    assert explain(bare, Engine.VLLM).verdict is Verdict.READY
    assert explain(bare, Engine.SGLANG).phase is Phase.HTTP_UP


def test_fatal_after_ready_fails_but_a_request_error_does_not() -> None:
    ready = b"(APIServer pid=1) INFO:     Application startup complete.\n"
    request_error = (
        b"(APIServer pid=1) ERROR 02-22 23:59:28 [chat.py:2] Traceback (most recent call last):\n"
        b"(APIServer pid=1) ERROR 02-22 23:59:28 [chat.py:2] ValueError: too long\n"
    )
    assert explain(ready + request_error).verdict is Verdict.READY
    dead = b"(EngineCore pid=3) ERROR 02-22 23:59:30 [c.py:1] EngineCore encountered a fatal error."
    state = explain(ready + request_error + dead)
    assert (state.verdict, state.phase, state.reason) == (Verdict.FAILED, Phase.READY, Reason.CRASH)


def test_the_cause_outranks_the_kill_and_noise_after_it_changes_nothing() -> None:
    log = (
        b"[2026-02-22 23:41:10 TP0] Load weight begin. avail mem=78.00 GB\n"
        b"[2026-02-22 23:41:11] Received sigquit from a child process.\n"
        b"[2026-02-22 23:41:11 TP0] Scheduler hit an exception: Traceback (most recent call last):"
        b"\n"
        b'  File "/sgl/srt/model_loader/loader.py", line 520, in load_model\n'
        b"    model = _initialize_model(\n"
        b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.75 GiB.\n"
        b"Exception ignored in: <function ZMQSocket.__del__ at 0x7f1c>\n"
        b"Traceback (most recent call last):\n"
        b"AttributeError: 'NoneType' object has no attribute 'close'\n"
        b"Killed\n"
    )
    scanner = LogScanner()
    fatal = [e.reason for e in scanner.feed(log) + scanner.finish() if e.kind is EventKind.FATAL]
    assert fatal == [Reason.KILLED, Reason.CRASH, Reason.OOM]
    state = scanner.state
    assert (state.reason, state.phase) == (Reason.OOM, Phase.LOADING_WEIGHTS)
    assert state.excerpt[-1].startswith("torch.OutOfMemoryError: CUDA out of memory")
    assert any("load_model" in line for line in state.excerpt)
    assert state.hint == HINTS[Reason.OOM]


def test_context_length_text_is_a_warning_unless_raised() -> None:
    text = (
        b"Warning: Target model's context_length (262144) is greater than the derived "
        b"context_length (131072). To allow overriding this maximum, set the env var "
        b"SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1"
    )
    scanner = LogScanner()
    events = scanner.feed(b"[2026-02-22 23:41:10 TP0] " + text + b"\n")
    assert [e.kind for e in events] == [EventKind.WARNING]
    assert scanner.state.verdict is Verdict.STARTING
    raised = b'Traceback (most recent call last):\n  File "x.py", line 1, in f\nValueError: ' + text
    assert explain(raised).reason is Reason.CONTEXT_LENGTH


def test_an_exception_line_outside_a_traceback_is_prose() -> None:
    assert (
        explain(b"RuntimeError: this line was only quoted in a message\n").verdict
        is Verdict.STARTING
    )


def test_a_giant_bar_line_is_read_redraw_by_redraw_in_bounded_memory() -> None:
    scanner = LogScanner()
    redraw = (
        b"\rCapturing batches (bs=8 avail_mem=2.0 GB):  %3d%%|#  | %d/500 [00:01<00:10, 9.9it/s]"
    )
    total = 0
    for start in range(0, 500, 50):
        chunk = b"".join(redraw % (i // 5, i) for i in range(start, start + 50))
        total += len(chunk)
        scanner.feed(chunk)
        assert len(scanner._segments.pending()) <= MAX_SEGMENT_BYTES
    assert scanner.state.progress == Progress("Capturing batches (bs=8 avail_mem=2.0 GB)", 499, 500)
    assert scanner.state.lines_seen == 1 and scanner.state.bytes_seen == total


def test_every_reason_has_a_hint_and_every_row_is_well_formed() -> None:
    assert set(HINTS) == set(Reason)
    for row in SIGNATURES:
        assert row.needle == row.needle.lower(), row
        assert row.needle.strip(), row
