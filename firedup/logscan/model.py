"""The values the log classifier hands out: verdicts, phases, reasons, events and state."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import Any

from firedup.engine import Engine


class _Text(str, Enum):  # noqa: UP042 - StrEnum is 3.11; this package runs on 3.8
    """A string enum that prints as its value, like 3.11's StrEnum (this package stays 3.8)."""

    def __str__(self) -> str:
        return str(self.value)


class Verdict(_Text):
    STARTING = "starting"
    READY = "ready"
    FAILED = "failed"


class Phase(_Text):
    """Startup phases in the order a healthy server walks through them."""

    LAUNCHING = "launching"
    INIT_DISTRIBUTED = "init_distributed"
    LOADING_WEIGHTS = "loading_weights"
    KV_CACHE = "kv_cache"
    CUDA_GRAPH = "cuda_graph"
    DRAFT_LOADING = "draft_loading"
    DRAFT_CUDA_GRAPH = "draft_cuda_graph"
    HTTP_UP = "http_up"
    WARMUP = "warmup"
    READY = "ready"

    @property
    def order(self) -> int:
        return _PHASE_ORDER[self]


_PHASE_ORDER = {phase: index for index, phase in enumerate(Phase)}


class Reason(_Text):
    OOM = "oom"
    CONTEXT_LENGTH = "context_length"
    MISSING_MODEL_HOOK = "missing_model_hook"
    NCCL = "nccl"
    PORT_IN_USE = "port_in_use"
    MODEL_NOT_FOUND = "model_not_found"
    CUDA_GRAPH_CAPTURE = "cuda_graph_capture"
    WARMUP_FAILED = "warmup_failed"
    ENGINE_INIT = "engine_init"
    BAD_ARGS = "bad_args"
    JIT_BUILD = "jit_build"
    NO_KERNEL_IMAGE = "no_kernel_image"
    UNSUPPORTED_GPU = "unsupported_gpu"
    UNSUPPORTED_MODEL = "unsupported_model"
    FATAL_PYTHON_ERROR = "fatal_python_error"
    KILLED = "killed"
    CRASH = "crash"

    @property
    def rank(self) -> int:
        """How much a reason explains: a more telling one replaces a vaguer one, never back.

        Any named cause (oom, nccl, ...) beats an exception we have no name for (crash), which
        beats a bare kill (killed), which beats a summary ("Initialization failed. Please see
        the error messages above", "Engine core initialization failed"): the summary points at
        the lines before it, and those carry the cause whenever the log has one.
        """
        return _GENERIC_RANK.get(self, 3)


_GENERIC_RANK = {Reason.CRASH: 2, Reason.KILLED: 1, Reason.ENGINE_INIT: 0}


class EventKind(_Text):
    PHASE = "phase"
    PROGRESS = "progress"
    WARNING = "warning"
    FATAL = "fatal"
    READY = "ready"


@dataclass(frozen=True)
class Progress:
    """One tqdm bar reading, e.g. `Capturing batches (bs=48 ...)` at 0/23."""

    label: str
    done: int
    total: int
    # What tqdm prints after the count, when it does ("4.61it/s", "00:04"): annotations of a
    # reading, not its identity, so two readings at the same count compare equal.
    rate: str = field(default="", compare=False)
    eta: str = field(default="", compare=False)

    def to_json(self) -> dict[str, Any]:
        return {"label": self.label, "done": self.done, "total": self.total}


@dataclass(frozen=True)
class PhaseSpan:
    phase: Phase
    start: datetime | None
    end: datetime | None
    # The last bar reading seen in this phase: its end is news even when the next phase
    # arrives in the same chunk and the state's own `progress` has moved on.
    progress: Progress | None = None

    @property
    def duration_s(self) -> float | None:
        if self.start is None or self.end is None:
            return None
        return (self.end - self.start).total_seconds()

    def to_json(self) -> dict[str, Any]:
        return {
            "phase": self.phase.value,
            "start": _iso(self.start),
            "end": _iso(self.end),
            "duration_s": self.duration_s,
            "progress": self.progress.to_json() if self.progress else None,
        }


@dataclass(frozen=True)
class Event:
    """Something a chunk completed: a phase entered, a bar moved, a warning, a fatal, ready."""

    kind: EventKind
    phase: Phase
    text: str
    progress: Progress | None = None
    timestamp: datetime | None = None
    reason: Reason | None = None


@dataclass(frozen=True)
class EarlierLaunch:
    """How the launch before the one explained ended, as far as the log showed it."""

    verdict: Verdict
    phase: Phase
    reason: Reason | None
    stopped: bool  # it was told to stop (a signal, a shutdown)

    def to_json(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict.value,
            "phase": self.phase.value,
            "reason": self.reason.value if self.reason else None,
            "stopped": self.stopped,
        }


@dataclass(frozen=True)
class ScanState:
    """A snapshot of everything the classifier knows after the bytes fed so far."""

    verdict: Verdict
    phase: Phase
    reason: Reason | None
    hint: str | None
    excerpt: tuple[str, ...]
    progress: Progress | None
    engine: Engine | None
    phases: tuple[PhaseSpan, ...]
    bytes_seen: int
    lines_seen: int
    last_line: str
    last_timestamp: datetime | None = None
    launches: int = 1  # launches the log holds (`>> server.log`): the last one is explained
    earlier: EarlierLaunch | None = None  # the launch before it

    def to_json(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict.value,
            "engine": self.engine.value if self.engine else None,
            "phase": self.phase.value,
            "reason": self.reason.value if self.reason else None,
            "hint": self.hint,
            "excerpt": list(self.excerpt),
            "phases": [span.to_json() for span in self.phases],
            "progress": self.progress.to_json() if self.progress else None,
            "bytes_seen": self.bytes_seen,
            "lines_seen": self.lines_seen,
            "last_line": self.last_line,
            "last_timestamp": _iso(self.last_timestamp),
            "launches": self.launches,
            "earlier": self.earlier.to_json() if self.earlier else None,
        }


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment else None
