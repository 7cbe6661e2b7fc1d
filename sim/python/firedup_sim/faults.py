"""FIREDUP_SIM_FAULT: faults to inject, comma separated (see docs/simulated-node.md)."""

from __future__ import annotations

import os

KNOWN = frozenset(
    {
        "oom_load",
        "oom_capture",
        "nccl_error",
        "nccl_hang",
        "rank_killed",
        "warmup_fail",
        "slow_capture",
        "crash_after_ready",
        "worker_exit_after_ready",
        "hang_after_ready",
    }
)
AFTER_READY_S = 2.0  # nominal seconds from ready to a post-ready fault


def active() -> frozenset[str]:
    """FIREDUP_SIM_FAULT, plus FIREDUP_SIM_FAULT_FILE's contents when that file exists: a
    fault that comes with a later launch of the same script (the node changed, not the
    launch), for what a restart meets."""
    raw = os.environ.get("FIREDUP_SIM_FAULT", "")
    path = os.environ.get("FIREDUP_SIM_FAULT_FILE", "")
    if path and os.path.exists(path):
        with open(path) as fh:
            raw += "," + fh.read().replace("\n", ",")
    names = frozenset(part.strip() for part in raw.split(",") if part.strip())
    unknown = names - KNOWN
    if unknown:
        raise SystemExit(
            f"FIREDUP_SIM_FAULT: unknown fault(s) {sorted(unknown)}; known: {sorted(KNOWN)}"
        )
    return names


def has(name: str) -> bool:
    return name in active()


def fault_rank(tp_size: int) -> int:
    """The rank that suffers a single-rank fault: the last one (a non-zero rank when TP>1)."""
    return int(os.environ.get("FIREDUP_SIM_FAULT_RANK", tp_size - 1))
