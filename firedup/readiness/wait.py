"""The wait loop: follow a run's log (read on the node), look on events and ticks, decide.

"Not yet" is a value; "dead" is raised and never retried; a dropped connection is retried with
backoff (tenacity) and resumes at the same offset, never relaunching. Sleep and clock are
injected so tests can drive the loop. What a look finds and how it is judged is in
`firedup.readiness.watch`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from tenacity import Retrying, retry_if_exception_type, wait_exponential

from firedup.errors import NotReadyError, TransientConnectError
from firedup.launch.runs import RunMeta
from firedup.logscan import Phase
from firedup.node.base import Node
from firedup.readiness.rawlog import RawFollower
from firedup.readiness.watch import (
    FAIL_GRACE_S,
    STALL_AFTER_S,
    RunWatcher,
    Signals,
    WaitStatus,
)

LOADING_LOOK_S = 10.0  # between looks while loading; phase changes still look at once


@dataclass
class Waiter:
    """One wait: follow the stream, look on events and ticks, decide."""

    watcher: RunWatcher
    deadline: float
    tick_s: float
    on_status: Callable[[WaitStatus], None]
    guard: Callable[[], None]
    timeout_s: float = 1800.0
    last: WaitStatus | None = None

    def _look(self) -> WaitStatus:
        self.guard()
        # Bounded by the time left: a frozen link must not hold the wait past its deadline.
        left = min(30.0, max(1.0, self.deadline - self.watcher.clock()))
        status = self.watcher.look(timeout_s=left)
        self.last = status
        self.on_status(status)
        return status

    def _interval(self) -> float:
        """How long between looks: slow while loading (the stream reports a death or a phase
        change at once, and each look costs the node a dozen forks), every tick once the port
        may be open and readiness is a matter of seconds."""
        scan = self.watcher.scan
        if self.watcher.saw_listening or scan.phase.order >= Phase.HTTP_UP.order:
            return self.tick_s
        # A short wait (a test, a quick re-check) still gets several looks before its deadline.
        return max(self.tick_s, min(LOADING_LOOK_S, self.timeout_s / 10))

    def _check_deadline(self, status: WaitStatus | None) -> None:
        if self.watcher.clock() < self.deadline or status is None:
            return
        run = self.watcher.run
        missing = ", ".join(n for n, ok in _signal_list(status.signals) if not ok) or "none"
        where = (
            f"the log says ready but not every signal agrees (missing: {missing})"
            if status.phase is Phase.READY
            else f"stuck in phase {status.phase.value}, log silent for {status.silent_s:.0f} s "
            f"(missing: {missing})"
        )
        raise NotReadyError(
            f"{run.host}: not ready after {status.elapsed_s:.0f} s; {where}; "
            "the server is still running",
            hint=f"`fab wait --host {run.host}` re-attaches; "
            f"`fab logs --host {run.host}` shows the log; `fab stop --host {run.host}` ends it",
        )

    def follow(self) -> WaitStatus:
        """Stream until ready; raises on death, deadline, or a lost connection (retried)."""
        status = self._look()
        if status.ready:
            return status
        last_look = self.watcher.clock()
        for urgent in self.watcher.updates(self.tick_s):
            self.guard()
            now = self.watcher.clock()
            failing = self.watcher.failing_since
            if self.watcher.failed_for_sure or (
                failing is not None and now - failing >= FAIL_GRACE_S
            ):
                raise self.watcher.fail()
            if failing is None and (urgent or now - last_look >= self._interval()):
                status, last_look = self._look(), now
                if status.ready:
                    return status
            self._check_deadline(self.last)
        # The stream ended: `tail --pid` saw the server exit (or the file went away).
        status = self._look()
        if status.ready:
            return status
        self._check_deadline(status)
        return status


def _signal_list(signals: Signals) -> list[tuple[str, bool]]:
    return [
        ("process alive", signals.alive),
        ("ready line", signals.log_ready),
        ("port listening", signals.listening),
        ("health 200", signals.health == 200),
    ]


@dataclass(frozen=True)
class WaitOptions:
    timeout_s: float
    tick_s: float = 1.0
    phase_budgets_s: Mapping[str, float] = field(default_factory=dict)
    stall_after_s: float = STALL_AFTER_S


def _ignore(_value: object) -> None:
    return None


@dataclass(frozen=True)
class WaitHooks:
    """How a wait reports: each status, each log chunk (for --follow), each reconnect.

    Giving `on_log` asks for the raw log: it then streams on a channel of its own and is
    delivered from a thread of its own (firedup.readiness.rawlog); without it, the log stays
    on the node and only the reader's states cross the link."""

    on_status: Callable[[WaitStatus], None] = _ignore
    on_log: Callable[[bytes], None] = _ignore
    on_reconnect: Callable[[str], None] = _ignore
    # Called on every chunk and tick: raises to end the wait (another rank of a multi-node
    # deployment died). Must be cheap: it runs often.
    guard: Callable[[], None] = lambda: None


NO_HOOKS = WaitHooks()


def wait_ready(
    node: Node,
    run: RunMeta,
    options: WaitOptions,
    hooks: WaitHooks = NO_HOOKS,
    *,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> WaitStatus:
    """Wait until every readiness signal agrees; raise when the run dies or the deadline passes."""
    watcher = RunWatcher(node, run, clock, options.phase_budgets_s, options.stall_after_s)
    waiter = Waiter(
        watcher,
        clock() + options.timeout_s,
        options.tick_s,
        hooks.on_status,
        hooks.guard,
        options.timeout_s,
    )

    def give_up(_state: object) -> bool:
        return clock() >= waiter.deadline

    def report(state: object) -> None:
        outcome = getattr(state, "outcome", None)
        error = outcome.exception() if outcome is not None else None
        hooks.on_reconnect(f"{error}; reconnecting, resuming the log at byte {watcher.offset}")

    retrying = Retrying(
        retry=retry_if_exception_type(TransientConnectError),
        wait=wait_exponential(multiplier=0.2, min=0.2, max=5),
        stop=give_up,
        sleep=sleep,
        before_sleep=report,
        reraise=True,
    )
    follower = RawFollower(node, run, hooks.on_log).start() if hooks.on_log is not _ignore else None
    try:
        return _until_ready(retrying, waiter, run, options, sleep)
    finally:
        if follower is not None:
            follower.stop()


def _until_ready(
    retrying: Retrying,
    waiter: Waiter,
    run: RunMeta,
    options: WaitOptions,
    sleep: Callable[[float], None],
) -> WaitStatus:
    while True:
        try:
            status = retrying(waiter.follow)
        except TransientConnectError as exc:
            raise TransientConnectError(
                f"{exc.message}; gave up reconnecting at the deadline",
                hint=f"the server was left as it was; `fab wait --host {run.host}` re-attaches",
            ) from None
        if status.ready:
            return status
        # The follow ended with the server alive but not ready (its main pid is gone while
        # other members of its session live on): look again after a tick, do not spin.
        sleep(options.tick_s)
