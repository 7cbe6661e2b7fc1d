"""How fast the log classifier reads, and that it reads linearly.

Builds a synthetic SGLang TP8 EAGLE-3 log of the requested size: per-rank phase lines, NCCL
INFO floods, tqdm bars redrawn with \\r (including one multi-megabyte bar line), warnings,
and a long tail of serving traffic (access log, Prefill/Decode batch lines), then feeds it
to `LogScanner` in chunks of several sizes and prints MB/s. Doubling the input should about
cost the same time again: the marginal MB/s stays flat (a quadratic reader's would fall).

    .venv/bin/python bench/logscan_throughput.py [--mb 40] [--repeat 3] [--cpu]

--cpu times the reader by the CPU time it used rather than the wall clock: on a machine shared
with other jobs the wall clock measures them too, and comparing two versions needs --cpu.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterator

from firedup.logscan import LogScanner, ScanState, Verdict

RANKS = [f"TP{i}" for i in range(8)]


def _bar(label: str, total: int, sglang: bool = False) -> bytes:
    parts = []
    for i in range(total + 1):
        pct = 100 * i // total
        if sglang:
            parts.append(
                f"\r{label}: {pct:3d}% Completed | {i}/{total} [00:{i % 60:02d}<00:10,  1.00it/s]"
            )
        else:
            bar = ("█" * (pct // 10)).ljust(10)
            parts.append(
                f"\r{label}: {pct:3d}%|{bar}| {i}/{total} [00:{i % 60:02d}<00:10, 1.00it/s]"
            )
    return ("".join(parts) + "\n").encode()


STAMP = "[2026-02-22 23:5{m}:{s:02d}{rank}] "
PER_RANK_BEFORE_LOAD = ["Init torch distributed begin."]
PER_RANK_LOAD = ["Load weight begin. avail mem=138.21 GB"]
PER_RANK_AFTER_LOAD = [
    "Load weight end. elapsed=590.4 s, type=KimiK25ForConditionalGeneration, avail mem=67.80 GB",
    "KV Cache is allocated. #tokens: 1162518, KV size: 39.58 GB",
    "Capture cuda graph begin. This can take up to several minutes. avail mem=24.90 GB",
]
NCCL = "gpu-node:4242:{pid} [{gpu}] NCCL INFO Channel {ch:02d}/32 : 0[0] -> 1[1] via P2P/CUMEM/read"
SERVING = [
    'INFO:     10.0.0.{a}:5{b:04d} - "POST /v1/chat/completions HTTP/1.1" 200 OK',
    "Prefill batch, #new-seq: 1, #new-token: {b}, #cached-token: 0, token usage: 0.01, "
    "#running-req: {a}, #queue-req: 0, ",
    "Decode batch. #running-req: {a}, #token: {b}, token usage: 0.08, cuda graph: True, "
    "gen throughput (token/s): 812.33, #queue-req: 0, ",
]


def _line(message: str, rank: str = "", second: int = 0) -> bytes:
    prefix = STAMP.format(m=second // 60 % 10, s=second % 60, rank=f" {rank}" if rank else "")
    return (prefix + message + "\n").encode()


def _per_rank(messages: list[str]) -> Iterator[bytes]:
    for message in messages:
        for rank in RANKS:
            yield _line(message, rank)


def _startup() -> Iterator[bytes]:
    yield _line("server_args=ServerArgs(model_path='/models/Kimi-K2.5', tp_size=8)")
    yield from _per_rank(PER_RANK_BEFORE_LOAD)
    for i in range(5000):
        yield (NCCL.format(pid=4300 + i % 8, gpu=i % 8, ch=i % 32) + "\n").encode()
    yield from _per_rank(PER_RANK_LOAD)
    yield _bar("Loading safetensors checkpoint shards", 64, sglang=True)
    yield _line(
        "Setup Custom allreduce failed with CUDA error: peer access is not supported", "TP0"
    )
    yield from _per_rank(PER_RANK_AFTER_LOAD)
    # One physical line of about 4 MB: a bar redrawn 40 000 times without a newline.
    yield _bar("Capturing batches (bs=48 avail_mem=24.50 GB)", 40_000)
    yield from _per_rank(["Capture draft cuda graph begin. avail mem=21.60 GB"])
    yield _bar("Capturing batches (bs=48 avail_mem=21.50 GB)", 23)
    yield _line("INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)")
    yield _line('INFO:     127.0.0.1:40012 - "GET /model_info HTTP/1.1" 200 OK')
    yield _line("The server is fired up and ready to roll!")


def _serving(i: int) -> bytes:
    message = SERVING[i % 3].format(a=i % 48, b=i % 9999)
    return _line(message, "TP0" if i % 3 else "", i // 40)  # a busy server: ~40 lines a second


def synthetic_log(size_bytes: int) -> bytes:
    parts = list(_startup())
    total = sum(map(len, parts))
    i = 0
    while total < size_bytes:
        line = _serving(i)
        parts.append(line)
        total += len(line)
        i += 1
    return b"".join(parts)


CLOCK = time.perf_counter


def scan(data: bytes, chunk: int) -> tuple[float, ScanState]:
    scanner = LogScanner()
    view = memoryview(data)
    start = CLOCK()
    for offset in range(0, len(data), chunk):
        scanner.feed(bytes(view[offset : offset + chunk]))
    scanner.finish()
    state = scanner.state
    return CLOCK() - start, state


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=40.0, help="size of the synthetic log")
    parser.add_argument("--repeat", type=int, default=3, help="best of N runs")
    parser.add_argument("--cpu", action="store_true", help="time by CPU time, not wall clock")
    args = parser.parse_args()
    global CLOCK
    CLOCK = time.process_time if args.cpu else time.perf_counter
    data = synthetic_log(int(args.mb * 1e6))
    mb = len(data) / 1e6
    lines, redraws = data.count(b"\n"), data.count(b"\r")
    print(f"synthetic log: {mb:.1f} MB, {lines} lines, {redraws} bar redraws")
    for chunk in (1 << 20, 64 << 10, 4 << 10):
        best = min(scan(data, chunk)[0] for _ in range(args.repeat))
        _, state = scan(data, chunk)
        assert state.verdict is Verdict.READY, state
        print(f"  chunks of {chunk >> 10:5d} KiB: {best:6.2f} s  {mb / best:6.1f} MB/s")
    # Linear means each extra megabyte costs the same: compare the marginal rate of the
    # second quarter with that of the second half (a quadratic reader halves it each time).
    quarter, half = len(data) // 4, len(data) // 2
    times = [min(scan(data[:n], 1 << 20)[0] for _ in range(args.repeat)) for n in (quarter, half)]
    times.append(min(scan(data, 1 << 20)[0] for _ in range(args.repeat)))
    early = (half - quarter) / 1e6 / (times[1] - times[0])
    late = (len(data) - half) / 1e6 / (times[2] - times[1])
    print(f"  marginal rate: {early:.1f} MB/s (2nd quarter), {late:.1f} MB/s (2nd half)")


if __name__ == "__main__":
    main()
