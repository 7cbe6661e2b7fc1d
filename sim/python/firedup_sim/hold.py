"""A process that holds GPU memory on the simulated node, as another user's job would.

    python3 -m firedup_sim.hold --gpus 0,1,2,3 --mib 61440 [--name python3]

Holds `--mib` on each listed GPU (node indices, not CUDA ordinals) until it is signalled;
nvidia-smi lists it under its pid with every other process, whoever runs it.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading

from firedup_sim import gpustate, proctitle


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="firedup_sim.hold")
    parser.add_argument("--gpus", required=True, help="comma list of node GPU indices")
    parser.add_argument("--mib", type=int, default=40960)
    parser.add_argument("--name", default="python3")
    args = parser.parse_args(argv)
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    proctitle.set_title(args.name)
    holders = []
    for index in (int(x) for x in args.gpus.split(",")):
        holder = gpustate.Holder(0, args.name, node_index=index)
        holder.add_gb((args.mib - gpustate.CONTEXT_MIB) / 1024)
        holders.append(holder)
    print(f"holding {args.mib} MiB on GPUs {args.gpus}", flush=True)
    done.wait()
    for holder in holders:
        holder.release()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
