"""Peeling field logs: colour, control bytes, wrappers, engine prefixes, timestamps, segments."""

from __future__ import annotations

from datetime import datetime

import pytest

from firedup.logscan.normalize import Clock, clean, parse_line
from firedup.logscan.segments import MAX_SEGMENT_BYTES, Segmenter


@pytest.mark.parametrize(
    ("text", "message", "ranks"),
    [
        ("[2026-02-22 23:59:28 TP3] Load weight begin.", "Load weight begin.", "TP3"),
        ("[2026-02-22 23:59:28 DP0 TP0] Load weight begin.", "Load weight begin.", "DP0 TP0"),
        ("[2026-02-22 23:59:28 TP4 EP4] Load weight begin.", "Load weight begin.", "TP4 EP4"),
        ("[2026-02-22 23:59:28 PP2 ATTN_CP3 TP3 EP3] x", "x", "PP2 ATTN_CP3 TP3 EP3"),
        ("[2026-02-22 23:59:28.123 TP0 MOE_DP1] x", "x", "TP0 MOE_DP1"),
        ("[17:43:23 TP6] Capture cuda graph begin.", "Capture cuda graph begin.", "TP6"),
        ("[2026-02-22 23:59:28] The server is fired up", "The server is fired up", ""),
        ("[2026-02-22 23:59:28] INFO:     Uvicorn running on x", "Uvicorn running on x", ""),
        ("INFO 08-19 07:51:03 api_server.py:212] vLLM API", "vLLM API", ""),
        ("(APIServer pid=1) INFO 02-22 23:59:28 [api_server.py:1912] up", "up", "APIServer"),
        (
            "(EngineCore_DP0 pid=310) ERROR 02-22 23:59:28 [core.py:7]   File",
            "  File",
            "EngineCore_DP0",
        ),
        ("(Worker_TP2_EP2 pid=9) WARNING 02-22 23:59:28 [a.py:1] w", "w", "Worker_TP2_EP2"),
        (
            "(RayWorkerWrapper pid=5, ip=10.0.0.2) INFO 02-22 23:59:28 [w.py:1] r",
            "r",
            "RayWorkerWrapper",
        ),
        (
            "(APIServer pid=1) INFO:     Application startup complete.",
            "Application startup complete.",
            "APIServer",
        ),
        ("2025-06-25 11:25:58,633 - INFO - flashinfer.jit: Loading", "flashinfer.jit: Loading", ""),
        (
            "Loading safetensors checkpoint shards:  45% Completed | 29/64",
            "Loading safetensors checkpoint shards:  45% Completed | 29/64",
            "",
        ),
        ("    raise ValueError(", "    raise ValueError(", ""),
    ],
)
def test_engine_prefixes_are_peeled(text: str, message: str, ranks: str) -> None:
    line = parse_line(text)
    assert (line.message, line.ranks) == (message, ranks)


@pytest.mark.parametrize(
    "wrapped",
    [
        "2026-02-22T23:59:28.123456789Z [2026-02-22 23:59:28 TP0] Load weight begin.",
        "sglang-1  | [2026-02-22 23:59:28 TP0] Load weight begin.",
        "sglang_1 | 2026-02-22T23:59:28.1Z [2026-02-22 23:59:28 TP0] Load weight begin.",
        "Feb 22 23:59:28 gpu-node python3[4242]: [2026-02-22 23:59:28 TP0] Load weight begin.",
        "2026-02-22T23:59:28+0000 gpu sglang[4242]: [2026-02-22 23:59:28 TP0] Load weight begin.",
        "[pod/sglang-0/server] [2026-02-22 23:59:28 TP0] Load weight begin.",
        "│ [2026-02-22 23:59:28 TP0] Load weight begin.     │",
        "│ sglang-1  | [2026-02-22 23:59:28 TP0] Load weight begin. │",
    ],
)
def test_wrappers_are_peeled(wrapped: str) -> None:
    line = parse_line(wrapped)
    assert line.message == "Load weight begin."
    assert line.ranks == "TP0"
    assert line.text.startswith("[2026-02-22 23:59:28 TP0]")


def test_wrapper_timestamp_wins_over_engine_timestamp() -> None:
    # Every physical line carries docker's stamp, while bars and tracebacks have none of
    # their own: one clock for all lines keeps phase durations consistent.
    line = parse_line("2026-02-22T22:00:01.5Z [2026-02-22 23:59:28 TP0] x")
    assert Clock().resolve(line.stamp) == datetime(2026, 2, 22, 22, 0, 1, 500000)


@pytest.mark.parametrize(
    ("raw", "text"),
    [
        (b"\x1b[0;36m[2026-02-22 23:59:28]\x1b[0m up", "[2026-02-22 23:59:28] up"),
        (b"^[[0;36m[2026-02-22 23:59:28]^[[0m up", "[2026-02-22 23:59:28] up"),
        (b"\x1b]0;title\x07\x1b[2K\x1b[1A up", " up"),
        (b"a\x00b\x00\x00c", "abc"),
        (b"bad \xff\xfe bytes \xe6\xa8", "bad \ufffd\ufffd bytes \ufffd"),
        ("模型 ✓ █▌".encode(), "模型 ✓ █▌"),
    ],
)
def test_clean_removes_colour_and_control_bytes(raw: bytes, text: str) -> None:
    assert clean(raw) == text


def test_clock_fills_in_what_stamps_omit() -> None:
    clock = Clock()
    assert clock.resolve(parse_line("[2026-02-22 23:59:58 TP0] a").stamp) == datetime(
        2026, 2, 22, 23, 59, 58
    )
    # Time-only stamps borrow the date and roll over midnight.
    assert clock.resolve(parse_line("[00:00:03 TP0] b").stamp) == datetime(2026, 2, 23, 0, 0, 3)
    # vLLM prints no year: it comes from the last full stamp.
    vllm = parse_line("INFO 02-23 00:01:00 api_server.py:1] c").stamp
    assert clock.resolve(vllm) == datetime(2026, 2, 23, 0, 1)


def test_clock_without_any_full_date_still_orders_times() -> None:
    clock = Clock()
    first = clock.resolve(parse_line("[23:59:00 TP0] a").stamp)
    second = clock.resolve(parse_line("[00:01:00 TP0] b").stamp)
    assert first is not None and second is not None
    assert (second - first).total_seconds() == 120
    assert clock.resolve(parse_line("INFO 02-29 00:00:00 a.py:1] leap").stamp) is not None


def test_segments_split_on_cr_and_lf_and_count_physical_lines() -> None:
    seg = Segmenter()
    assert seg.feed(b"a\r\nb\rc") == [b"a", b"b"]
    assert seg.feed(b"d\n\n") == [b"cd"]
    assert (seg.newlines, seg.line_open) == (3, False)
    assert seg.feed(b"tail") == []
    assert seg.line_open and seg.finish() == [b"tail"]


def test_a_giant_unterminated_line_keeps_memory_bounded() -> None:
    seg = Segmenter()
    for _ in range(200):
        assert seg.feed(b"x" * 10_000) == []
        assert len(seg.pending()) <= MAX_SEGMENT_BYTES
    (segment,) = seg.feed(b"\nnext\n")[:1]
    assert segment == b"x" * MAX_SEGMENT_BYTES


def test_truncation_of_a_long_segment_does_not_depend_on_chunking() -> None:
    data = b"y" * (MAX_SEGMENT_BYTES + 5000) + b"\rz\n"
    whole = Segmenter().feed(data)
    pieces = Segmenter()
    cut = [pieces.feed(data[i : i + 777]) for i in range(0, len(data), 777)]
    assert [segment for part in cut for segment in part] == whole
