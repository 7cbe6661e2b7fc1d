"""Waiting for a run to be ready: one tenacity loop over probes of the node.

"Not yet" is a returned value (retried); "dead" is raised (never retried); a dropped connection
is retried separately, resuming at the same log offset. Sleep and clock are injected so tests
drive the loop without real time.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from tenacity import (
    RetryCallState,
    RetryError,
    Retrying,
    retry_if_exception_type,
    retry_if_result,
    wait_fixed,
)

from firedup.errors import NotReadyError, ServerCrashedError, TransientConnectError
from firedup.logscan import LogScanner, ScanState, Verdict
from firedup.node import Node
from firedup.probe import Probe, probe_run
from firedup.runs import RunMeta

TAIL_LINES = 15


@dataclass(frozen=True)
class Signals:
    """Each readiness signal on its own, so status and progress can show which one is missing."""

    alive: bool
    log_ready: bool
    listening: bool
    foreign_listeners: tuple[str, ...] = ()

    @property
    def ready(self) -> bool:
        return self.alive and self.log_ready and self.listening


@dataclass(frozen=True)
class WaitStatus:
    run: RunMeta
    signals: Signals
    scan: ScanState
    log_offset: int
    elapsed_s: float

    @property
    def ready(self) -> bool:
        return self.signals.ready


def signals_from(probe: Probe, scan: ScanState) -> Signals:
    return Signals(
        alive=probe.alive,
        log_ready=scan.verdict is Verdict.READY,
        listening=probe.listening_ours,
        foreign_listeners=tuple(lst.local for lst in probe.foreign_listeners),
    )


def _crash(run: RunMeta, scan: ScanState, tail: list[str]) -> ServerCrashedError:
    where = f"log: {run.log_path}"
    if scan.verdict is Verdict.FAILED and scan.reason is not None:
        excerpt = "\n".join(f"    {line}" for line in scan.excerpt)
        return ServerCrashedError(
            f"{run.host}: server failed in phase {scan.phase.value}: {scan.reason.value}\n"
            f"{excerpt}\n  {where}",
            hint=scan.hint,
        )
    last = "\n".join(f"    {line}" for line in tail[-TAIL_LINES:]) or "    (log is empty)"
    return ServerCrashedError(
        f"{run.host}: server exited without a known error in phase {scan.phase.value}; "
        f"last lines:\n{last}\n  {where}"
    )


class RunWatcher:
    """Reads a run's log incrementally from the launch offset and judges each probe."""

    def __init__(self, node: Node, run: RunMeta, clock: Callable[[], float]) -> None:
        self.node = node
        self.run = run
        self.clock = clock
        self.started = clock()
        self.offset = 0
        self.scanner = LogScanner(engine=run.engine)
        self.tail: list[str] = []

    def _feed(self, chunk: bytes) -> None:
        self.offset += len(chunk)
        self.scanner.feed(chunk)
        lines = chunk.decode("utf-8", "replace").replace("\r", "\n").splitlines()
        self.tail = [*self.tail, *(ln for ln in lines if ln.strip())][-TAIL_LINES:]

    def poll(self) -> WaitStatus:
        """One probe: returns a status, or raises ServerCrashedError when the run is dead."""
        probe = probe_run(self.node, self.run.rundir, self.run.port, self.offset)
        self._feed(probe.log_chunk)
        if not probe.alive:
            # Read whatever the dying process wrote after this probe's snapshot.
            while True:
                rest = probe_run(self.node, self.run.rundir, self.run.port, self.offset)
                if not rest.log_chunk:
                    break
                self._feed(rest.log_chunk)
            self.scanner.finish()
        scan = self.scanner.state
        if scan.verdict is Verdict.FAILED or not probe.alive:
            raise _crash(self.run, scan, self.tail)
        return WaitStatus(
            run=self.run,
            signals=signals_from(probe, scan),
            scan=scan,
            log_offset=self.offset,
            elapsed_s=self.clock() - self.started,
        )


def wait_ready(
    node: Node,
    run: RunMeta,
    *,
    timeout_s: float,
    poll_s: float = 1.0,
    on_status: Callable[[WaitStatus], None] = lambda _s: None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> WaitStatus:
    """Poll until every readiness signal agrees; raise when the run dies or the deadline passes."""
    watcher = RunWatcher(node, run, clock)
    deadline = clock() + timeout_s
    last: list[WaitStatus] = []

    def attempt() -> WaitStatus:
        status = watcher.poll()
        last[:] = [status]
        on_status(status)
        return status

    def past_deadline(_state: RetryCallState) -> bool:
        return clock() >= deadline

    retrying = Retrying(
        retry=retry_if_result(lambda s: not s.ready)
        | retry_if_exception_type(TransientConnectError),
        stop=past_deadline,
        wait=wait_fixed(poll_s),
        sleep=sleep,
    )
    try:
        return retrying(attempt)
    except RetryError as exc:
        outcome = exc.last_attempt
        if outcome.failed:
            raise NotReadyError(
                f"{run.host}: lost the node while waiting: {outcome.exception()}"
            ) from None
        status = last[0] if last else None
        phase = status.scan.phase.value if status else "unknown"
        missing = _missing(status.signals) if status else "no probe succeeded"
        raise NotReadyError(
            f"{run.host}: not ready after {timeout_s:.0f} s; last phase {phase} ({missing}); "
            f"the server is still running",
            hint=f"`fab wait --host {run.host}` re-attaches; "
            f"`fab logs --host {run.host}` shows the log",
        ) from None


def _missing(signals: Signals) -> str:
    missing = [
        name
        for name, ok in (("ready line", signals.log_ready), ("port listening", signals.listening))
        if not ok
    ]
    return "missing: " + ", ".join(missing) if missing else "all signals seen"
