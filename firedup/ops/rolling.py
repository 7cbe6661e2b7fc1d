"""A rolling restart: one batch of workers at a time, never the last healthy one, stopped at
the first new worker that fails (the rest keep serving).

Pure order and rules; the task layer supplies how a batch is restarted (the one deploy path,
`restart=True`: leave the router, drain, restart, wait until truly ready, join) and how many
workers outside a batch are serving now.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from firedup.errors import DeployError


class Step(StrEnum):
    RESTARTED = "restarted"
    FAILED = "failed"
    NOT_REACHED = "not restarted"


@dataclass(frozen=True)
class RollOutcome:
    steps: dict[str, tuple[Step, str]] = field(default_factory=dict)  # a failure's whole text
    stopped: str = ""  # why the roll stopped early ("" when every worker was restarted)
    failures: dict[str, DeployError] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.stopped


def batches(units: Sequence[str], size: int) -> list[list[str]]:
    if size < 1:
        raise ValueError("a batch holds at least one worker")
    return [list(units[i : i + size]) for i in range(0, len(units), size)]


def roll(
    units: Sequence[str],
    size: int,
    *,
    serving_outside: Callable[[list[str]], int],
    restart: Callable[[list[str]], Mapping[str, object | DeployError]],
    on_skip: Callable[[str, str], None] = lambda _u, _why: None,
) -> RollOutcome:
    """Restart `units` batch by batch. Before each batch, `serving_outside(batch)` must find
    at least one worker serving outside it; a batch with a failed worker ends the roll."""
    steps: dict[str, tuple[Step, str]] = {}
    failures: dict[str, DeployError] = {}
    stopped = ""
    for batch in batches(units, size):
        if stopped:
            for unit in batch:
                steps[unit] = (Step.NOT_REACHED, stopped)
                on_skip(unit, stopped)
            continue
        if serving_outside(batch) < 1:
            stopped = (
                f"restarting {', '.join(batch)} would leave no worker serving: "
                "the roll never takes out the last healthy one"
            )
            for unit in batch:
                steps[unit] = (Step.NOT_REACHED, stopped)
                on_skip(unit, stopped)
            continue
        for unit, result in restart(batch).items():
            if isinstance(result, DeployError):
                steps[unit] = (Step.FAILED, str(result))
                failures[unit] = result
                stopped = stopped or f"{unit} failed: {str(result).splitlines()[0]}"
            else:
                steps[unit] = (Step.RESTARTED, "")
    return RollOutcome(steps, stopped, failures)
