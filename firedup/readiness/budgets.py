"""Per-phase budgets and stall detection (pure: the clock is passed in).

A phase may take as long as its budget. Past it, the wait stays calm while the log keeps
moving (each byte of progress extends the budget, like systemd's EXTEND_TIMEOUT_USEC); only
when a phase is over budget AND the log has been silent for `stall_after_s` does it warn, once
per silence, with a hint. Warnings never fail a deploy; the overall deadline does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from firedup.engine import Engine
from firedup.logscan import Phase

# Seconds a phase may take on a big node before silence in it is worth a word. Generous on
# purpose: Kimi-size loads take 10-20 min, DeepGEMM JIT warns "typically 10-20 mins", a draft
# capture can take 5x the target's (engines.md §9).
DEFAULT_BUDGETS_S: Mapping[Engine, Mapping[Phase, float]] = {
    Engine.SGLANG: {
        Phase.LAUNCHING: 120,
        Phase.INIT_DISTRIBUTED: 300,
        Phase.LOADING_WEIGHTS: 1800,
        Phase.KV_CACHE: 300,
        Phase.CUDA_GRAPH: 900,
        Phase.DRAFT_LOADING: 600,
        Phase.DRAFT_CUDA_GRAPH: 900,
        Phase.HTTP_UP: 120,
        Phase.WARMUP: 600,  # SGLANG_WARMUP_TIMEOUT defaults to 600 s
    },
    Engine.VLLM: {
        Phase.LAUNCHING: 300,
        Phase.INIT_DISTRIBUTED: 300,
        Phase.LOADING_WEIGHTS: 1800,
        Phase.KV_CACHE: 600,
        Phase.CUDA_GRAPH: 900,
        Phase.DRAFT_LOADING: 600,
        Phase.DRAFT_CUDA_GRAPH: 900,
        Phase.HTTP_UP: 120,
        Phase.WARMUP: 120,
    },
}

STALL_HINTS: Mapping[Phase, str] = {
    Phase.INIT_DISTRIBUTED: "NCCL/c10d rendezvous can hang without an error: check that every "
    "node started, --dist-init-addr is reachable, and NCCL_DEBUG=INFO in the log",
    Phase.LOADING_WEIGHTS: "check disk throughput and that the model path is local, not a slow "
    "network mount; `fab logs` shows the shard bar",
    Phase.CUDA_GRAPH: "a bar at 0/N is JIT work and can sit for minutes; if it never moves, "
    "try a lower cuda_graph_max_bs in the deployment or --disable-cuda-graph",
    Phase.DRAFT_CUDA_GRAPH: "draft capture is often 5x slower than the target's; if it never "
    "moves, lower cuda_graph_max_bs in the deployment",
    Phase.WARMUP: "the warmup request has not come back; SGLANG_WARMUP_TIMEOUT (600 s) ends it",
}
DEFAULT_STALL_HINT = "no log output for a long time: `fab logs --host HOST` shows the last lines"


def budgets_for(engine: Engine, overrides: Mapping[str, float]) -> dict[Phase, float]:
    """The defaults for an engine with the deployment's `phase_budgets_s` applied."""
    budgets = dict(DEFAULT_BUDGETS_S[engine])
    budgets.update({Phase(name): float(seconds) for name, seconds in overrides.items()})
    return budgets


@dataclass(frozen=True)
class StallWarning:
    phase: Phase
    in_phase_s: float
    silent_s: float
    budget_s: float
    hint: str

    def text(self) -> str:
        return (
            f"no progress in {self.phase.value} for {self.silent_s:.0f}s "
            f"({self.in_phase_s:.0f}s in phase, budget {self.budget_s:.0f}s); "
            f"still waiting. hint: {self.hint}"
        )


class StallTracker:
    """Remembers when the phase began and when the log last moved; says when to worry."""

    def __init__(self, budgets: Mapping[Phase, float], stall_after_s: float, now: float) -> None:
        self.budgets = budgets
        self.stall_after_s = stall_after_s
        self.phase: Phase | None = None
        self.phase_since = now
        self.progress_at = now
        self.warned = False

    def observe(self, phase: Phase, grew: bool, now: float) -> StallWarning | None:
        """Record one look at the run; return a warning the first time a stall is seen."""
        if phase != self.phase:
            self.phase, self.phase_since = phase, now
        if grew:
            self.progress_at, self.warned = now, False
            return None
        budget = self.budgets.get(phase, 600.0)
        in_phase = now - self.phase_since
        silent = now - self.progress_at
        if self.warned or in_phase < budget or silent < self.stall_after_s:
            return None
        self.warned = True
        hint = STALL_HINTS.get(phase, DEFAULT_STALL_HINT)
        return StallWarning(phase, in_phase, silent, budget, hint)

    def silent_s(self, now: float) -> float:
        return now - self.progress_at
