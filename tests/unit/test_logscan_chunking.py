"""The same bytes give the same answer however they are cut: mid-line, mid-\\r, mid-UTF-8.

The readiness wait feeds whatever each poll fetched, so a chunk boundary can fall anywhere:
inside a rank prefix, between the \\r and \\n of a CRLF, inside a multi-byte character, in
the middle of a bar redraw. Events, the state before `finish()` and the state after it must
all be independent of the cuts.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from firedup.logscan import Event, LogScanner, ScanState

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "logs"
# Small and nasty ones: glued bars, caret text, NULs, CRLF, mid-UTF-8 truncation, chains.
FIXTURES = sorted(path for path in LOGS.glob("*/*.log") if 0 < path.stat().st_size <= 48_000)

PIECES = [
    b"[2026-02-22 23:41:10 TP0] Init torch distributed begin.\n",
    b"[2026-02-22 23:41:12 TP1] Load weight begin. avail mem=78.00 GB\n",
    b"\rLoading safetensors checkpoint shards:  50% Completed | 1/2 [00:01<00:01,  1.0it/s]",
    b"\rCapturing batches (bs=48 avail_mem=2.0 GB):   0%|          | 0/23 [00:00<?, ?it/s]",
    b"[2026-02-22 23:41:20 TP0] Capture draft cuda graph begin. avail mem=20.0 GB\n",
    b"[2026-02-22 23:41:20] Scheduler hit an exception: Traceback (most recent call last):\n",
    b'  File "/sgl/srt/x.py", line 3, in f\n',
    b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n",
    b"[2026-02-22 23:41:21] Received sigquit from a child proces.\n",
    b"[2026-02-22 23:41:30] INFO:     Uvicorn running on http://0.0.0.0:30000\n",
    b"[2026-02-22 23:41:40] The server is fired up and ready to roll!\n",
    b"(APIServer pid=1) INFO 02-22 23:41:50 [api_server.py:1] vLLM API server version 0.11.0\r\n",
    b"(APIServer pid=1) INFO:     Application startup complete.\r\n",
    b"\x1b[0;36m^[[1m\xe6\xa8\xa1\xe5\x9e\x8b \xff\xfe\x00\x00 \xf0\x9f\x94\xa5\n",
    b"sglang-1  | 2026-02-22T23:41:02.1Z [2026-02-22 23:41:02 TP3] KV Cache is allocated.\n",
    b"\r",
    b"\n",
]


def _run(data: bytes, cuts: list[int]) -> tuple[list[Event], ScanState, ScanState]:
    scanner = LogScanner()
    events: list[Event] = []
    start = 0
    for cut in sorted(set(cuts)):
        events += scanner.feed(data[start:cut])
        start = cut
    events += scanner.feed(data[start:])
    before = scanner.state
    events += scanner.finish()
    return events, before, scanner.state


def _whole(data: bytes) -> tuple[list[Event], ScanState, ScanState]:
    return _run(data, [])


@st.composite
def _cut_fixture(draw: st.DrawFn) -> tuple[bytes, list[int]]:
    data = draw(st.sampled_from(FIXTURES)).read_bytes()
    cuts = draw(st.lists(st.integers(0, len(data)), max_size=40))
    # Cuts right before or after a \r are the interesting ones: aim some there.
    carriage = [i + after for i, byte in enumerate(data) if byte == 0x0D for after in (0, 1)]
    if carriage:
        cuts += draw(st.lists(st.sampled_from(carriage), max_size=10))
    return data, cuts


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_cut_fixture())
def test_fixture_cut_anywhere_gives_same_events_and_state(case: tuple[bytes, list[int]]) -> None:
    data, cuts = case
    assert _run(data, cuts) == _whole(data)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from(PIECES) | st.binary(max_size=12), max_size=40),
    st.lists(st.integers(0, 4000), max_size=30),
)
def test_generated_text_cut_anywhere_gives_same_answer(
    pieces: list[bytes], cuts: list[int]
) -> None:
    data = b"".join(pieces)
    cuts = [cut % (len(data) + 1) for cut in cuts]
    assert _run(data, cuts) == _whole(data)


def test_byte_at_a_time_matches_whole_for_every_small_fixture() -> None:
    for path in FIXTURES[:: max(1, len(FIXTURES) // 12)]:
        data = path.read_bytes()
        assert _run(data, list(range(len(data)))) == _whole(data), path.name


def test_there_are_fixtures_to_cut() -> None:
    assert len(FIXTURES) >= 20
