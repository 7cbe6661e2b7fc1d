"""Write MB megabytes of NCCL INFO lines (as NCCL_DEBUG=INFO prints at init) to stdout."""

import os
import sys

LINE = (
    "gpu-node:4242:{pid} [{gpu}] NCCL INFO Channel {ch:02d}/32 : "
    "{gpu}[{gpu}] -> {nxt}[{nxt}] via P2P/CUMEM/read\n"
)


def main() -> None:
    target = int(float(sys.argv[1]) * 1e6)
    block = "".join(
        LINE.format(pid=4300 + i % 8, gpu=i % 8, nxt=(i + 1) % 8, ch=i % 32) for i in range(600)
    ).encode()
    written = 0
    while written < target:
        os.write(1, block)
        written += len(block)


main()
