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
from typing import TYPE_CHECKING

from firedup.errors import ConnectionLostError, NotReadyError, TransientConnectError
from firedup.launch.runs import RunMeta
from firedup.logscan import Phase, ScanState
from firedup.node.base import Node
from firedup.node.probe import Probe
from firedup.readiness.nodeside import HEARTBEAT_S
from firedup.readiness.rawlog import RawFollower

if TYPE_CHECKING:
    from tenacity import Retrying

from firedup.readiness.watch import (
    FAIL_GRACE_S,
    STALL_AFTER_S,
    RunWatcher,
    Signals,
    WaitStatus,
)

LOADING_LOOK_S = 10.0  # between looks while loading; phase changes still look at once
NODE_LOOK_SLACK_S = 5.0  # the node's looks are late by this much: take one over a round trip
SILENCE_SLACK_S = 10.0  # a node reader silent this long past its cadence: the link is gone
SILENCE_AT_DEADLINE_S = 1.0  # the same at the deadline: tell a frozen link from a slow start


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
    # What the log says after each chunk (phase, bar): between looks, for a live display.
    on_scan: Callable[[ScanState], None] = lambda _scan: None

    def _look(self, probe: Probe | None = None) -> WaitStatus:
        """Judge the look the node took (`probe`), or take one now over a round trip."""
        self.guard()
        # Bounded by the time left: a frozen link must not hold the wait past its deadline.
        left = min(30.0, max(1.0, self.deadline - self.watcher.clock()))
        status = self.watcher.look(timeout_s=left, probe=probe)
        self.last = status
        self.on_status(status)
        return status

    def _loading_interval(self) -> float:
        # A short wait (a test, a quick re-check) still gets several looks before its deadline.
        return max(self.tick_s, min(LOADING_LOOK_S, self.timeout_s / 10))

    def _interval(self) -> float:
        """How long between looks: slow while loading (the stream reports a death or a phase
        change at once, and each look costs the node a dozen forks), every tick once the port
        may be open and readiness is a matter of seconds."""
        scan = self.watcher.scan
        if self.watcher.saw_listening or scan.phase.order >= Phase.HTTP_UP.order:
            return self.tick_s
        return self._loading_interval()

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
        """Stream until ready; raises on death, deadline, or a lost connection (retried).

        Read on the node, the looks come with the stream (the node takes them on events and
        on the cadence); a round-trip look is only the fallback when none came for long."""
        watcher = self.watcher
        if not watcher.log.node_side:
            status = self._look()
            if status.ready:
                return status
        last_look = last_heard = watcher.clock()
        for urgent, probe in watcher.updates(self.tick_s, self._loading_interval()):
            self.guard()
            now = watcher.clock()
            if watcher.log.heard:
                last_heard, watcher.log.heard = now, False
                self.on_scan(watcher.scan)
            self._check_silence(now - last_heard)
            failing = watcher.failing_since
            settled = failing is not None and watcher.log.settled
            if (
                watcher.failed_for_sure
                or settled
                or (failing is not None and now - failing >= FAIL_GRACE_S)
            ):
                raise watcher.fail(probe)
            if failing is not None:
                watcher.last_probe = probe or watcher.last_probe
                continue  # a traceback is being written: let it end before judging
            if probe is not None or urgent or now - last_look >= self._fallback_interval():
                status, last_look = self._look(probe), now
                if status.ready:
                    return status
            self._check_deadline(self.last)
        # The stream ended: the server's main pid is gone (or the file went away).
        if watcher.log.node_side and watcher.log.final and watcher.failing_since is not None:
            raise watcher.fail()
        status = self._look()
        if status.ready:
            return status
        self._check_deadline(status)
        return status

    def _check_silence(self, silent_s: float) -> None:
        """The node's reader speaks at least every look interval (and every heartbeat): a
        longer silence is a frozen link, which no TCP error would report for minutes. Drop
        the connection (what follows reconnects) and let the retry loop decide."""
        if not self.watcher.log.node_side:
            return  # the plain log is silent whenever the server is
        expected = min(self._interval(), HEARTBEAT_S)
        late = self.watcher.clock() >= self.deadline
        if silent_s <= expected + (SILENCE_AT_DEADLINE_S if late else SILENCE_SLACK_S):
            return
        self.watcher.node.close()
        raise ConnectionLostError(
            f"{self.watcher.run.host}: the link went silent for {silent_s:.1f} s "
            f"(the node reports every {expected:.0f} s)"
        )

    def _fallback_interval(self) -> float:
        if not self.watcher.log.node_side:
            return self._interval()
        return 2 * self._interval() + NODE_LOOK_SLACK_S


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
    """How a wait reports: each status, each log chunk (for --follow), each reconnect, and
    the classifier's state as the node reader sends it (phase and bar move between looks).

    Giving `on_log` asks for the raw log: it then streams on a channel of its own and is
    delivered from a thread of its own (firedup.readiness.rawlog); without it, the log stays
    on the node and only the reader's states cross the link."""

    on_status: Callable[[WaitStatus], None] = _ignore
    on_scan: Callable[[ScanState], None] = _ignore
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
    # Here, not at the top: tenacity pulls in asyncio, which only a wait needs (CLI start-up).
    from tenacity import Retrying, retry_if_exception_type, wait_exponential

    watcher = RunWatcher(node, run, clock, options.phase_budgets_s, options.stall_after_s)
    waiter = Waiter(
        watcher,
        clock() + options.timeout_s,
        options.tick_s,
        hooks.on_status,
        hooks.guard,
        options.timeout_s,
        on_scan=hooks.on_scan,
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
