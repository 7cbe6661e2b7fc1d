"""Waiting for a run to be truly ready, without being fooled and without waiting on the dead.

The log is read next to it, on the node, by firedup's own classifier (firedup.readiness.logfeed)
over one long-lived channel, so a phase change, a fatal line or the server's exit is known
within a fraction of a second on any link, and the log stays on the node. Process, socket
and health are looked at on log events (a phase change, the ready line) and on a slower tick.
Ready means every signal agrees: the process group is alive, the ready line is in this run's
log, the port is in LISTEN by a process of our session, and the health endpoint answers 200
when asked from the node itself.

"Not yet" is a value; "dead" is raised and never retried; a dropped connection is retried with
backoff and the node's reader picks the log up again (a reconnect never relaunches). Sleep
and clock are injected so tests can drive the loop.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from firedup.engine import Engine
from firedup.errors import (
    ForeignListenerError,
    PreflightError,
    ServerCrashedError,
)
from firedup.launch.runs import RunMeta
from firedup.logscan import Phase, Reason, ScanState, Verdict
from firedup.node.base import Node, script_text
from firedup.node.probe import Probe, probe_run
from firedup.readiness.budgets import StallTracker, StallWarning, budgets_for
from firedup.readiness.logfeed import TAIL_LINES, LogFeed, Update

FAIL_GRACE_S = 3.0  # after a fatal line, how long to let the dying server finish its traceback
STALL_AFTER_S = 60.0
DEAD_GRACE_S = 10.0  # a dead server: how long the node reader may take to send the end
LOOK_LOG_BYTES = 64 * 1024


@dataclass(frozen=True)
class Signals:
    """Each readiness signal on its own, so status and progress can show which one is missing."""

    alive: bool
    log_ready: bool
    listening: bool
    health: int | None = None
    foreign_listeners: tuple[str, ...] = ()

    @property
    def ready(self) -> bool:
        return self.alive and self.log_ready and self.listening and self.health == 200


@dataclass(frozen=True)
class WaitStatus:
    run: RunMeta
    signals: Signals
    scan: ScanState
    log_offset: int
    elapsed_s: float
    silent_s: float = 0.0
    in_phase_s: float = 0.0
    warning: StallWarning | None = None

    @property
    def ready(self) -> bool:
        return self.signals.ready

    @property
    def phase(self) -> Phase:
        """The log's phase, moved to http_up when our port is already seen open: the socket
        can be a few lines ahead of the streamed log, and an open port is never "ready"."""
        if self.signals.listening and self.scan.phase.order < Phase.HTTP_UP.order:
            return Phase.HTTP_UP
        return self.scan.phase


def signals_from(probe: Probe, scan: ScanState) -> Signals:
    return Signals(
        alive=probe.alive,
        log_ready=scan.verdict is Verdict.READY,
        listening=probe.listening_ours,
        health=probe.health,
        foreign_listeners=tuple(
            f"{lst.local} pid={','.join(map(str, sorted(lst.pids))) or '?'}"
            for lst in probe.foreign_listeners
        ),
    )


def health_url(run: RunMeta) -> str:
    """The health endpoint as seen from the node itself."""
    host = run.bind if run.bind not in {"0.0.0.0", "::", ""} else "127.0.0.1"
    host = f"[{host}]" if ":" in host else host
    return f"http://{host}:{run.port}/health"


# The engine's cheap liveness check where /health is not: asked once the ready line is read
# (the wait, status, top, the watch). SGLang 0.5's /health runs a one-token generation and
# first sleeps a second; /server_info is a round trip to the scheduler, no batch. A release
# without it (0.4.0) answers 404: /health then. Before the ready line /health (503 in warmup).
LIVENESS = {Engine.SGLANG: "/server_info"}


def live_url(run: RunMeta) -> str:
    """The engine's cheap liveness check as seen from the node, "" where /health is it."""
    path = LIVENESS.get(run.engine)
    return health_url(run).removesuffix("/health") + path if path else ""


def look_spec(run: RunMeta, tick_s: float, loading_s: float | None = None) -> dict[str, Any]:
    """What the node reader needs to take the wait's look itself (nodeside.Looker)."""
    return {
        "script": script_text("probe"),
        "args": [run.rundir, str(run.port)],
        "health_url": health_url(run),
        "live_url": live_url(run),
        "tick_s": tick_s,
        "loading_s": loading_s or tick_s,
        "inproc": True,  # from /proc in the reader; probe.sh where /proc cannot tell
    }


def crash_error(run: RunMeta, scan: ScanState, tail: list[str], probe: Probe) -> Exception:
    where = f"log: {run.log_path}"
    if scan.reason is Reason.PORT_IN_USE and probe.foreign_listeners:
        holders = ", ".join(
            f"{lst.local} (pid {','.join(map(str, sorted(lst.pids))) or 'hidden'})"
            for lst in probe.foreign_listeners
        )
        return ForeignListenerError(
            f"{run.host}: port {run.port} is held by another process, not by our server: "
            f"{holders}; our run {run.run_id} failed to bind\n  {where}",
            hint="stop that process or choose another port for the deployment",
        )
    # Said at once; whether the processes then exit by themselves is told after the verdict.
    state = "" if not probe.alive else " (its processes were still alive when it was read)"
    if scan.verdict is Verdict.FAILED and scan.reason is not None:
        excerpt = "\n".join(f"    {line}" for line in scan.excerpt)
        return ServerCrashedError(
            f"{run.host}: server failed in phase {scan.phase.value}: {scan.reason.value}{state}\n"
            f"{excerpt}\n  {where}",
            hint=scan.hint,
            reason=scan.reason.value,
            excerpt=scan.excerpt,
            log_path=run.log_path,
            running=probe.alive,
        )
    last = "\n".join(f"    {line}" for line in tail[-TAIL_LINES:]) or "    (log is empty)"
    return ServerCrashedError(
        f"{run.host}: server exited without a known error in phase {scan.phase.value}; "
        f"last lines:\n{last}\n  {where}",
        reason="exited",
        excerpt=tuple(tail[-TAIL_LINES:]),
        log_path=run.log_path,
    )


class RunWatcher:
    """Holds what is known about one run: its log (firedup.readiness.logfeed), the looks,
    the stall clock."""

    def __init__(
        self,
        node: Node,
        run: RunMeta,
        clock: Callable[[], float],
        phase_budgets_s: Mapping[str, float] | None = None,
        stall_after_s: float = STALL_AFTER_S,
    ) -> None:
        self.node = node
        self.run = run
        self.clock = clock
        self.started = clock()
        self.log = LogFeed(run, self._failing)
        budgets = budgets_for(run.engine, phase_budgets_s or {})
        self.stalls = StallTracker(budgets, stall_after_s, self.started)
        self.seen_offset = 0
        self.failing_since: float | None = None
        self.dead_since: float | None = None
        self.following = False
        self.saw_listening = False
        self.live_url = live_url(run)  # "" once the release answered it with a 404
        self.last_probe: Probe | None = None

    def _failing(self) -> None:
        if self.failing_since is None:
            self.failing_since = self.clock()

    @property
    def scan(self) -> ScanState:
        return self.log.scan

    @property
    def offset(self) -> int:
        return self.log.offset

    @property
    def tail(self) -> list[str]:
        return self.log.tail

    @property
    def failed_for_sure(self) -> bool:
        """The log names the cause (oom, nccl, ...): no need to wait for the process to exit.
        A bare "Scheduler hit an exception" or sigquit line waits for the traceback's end."""
        reason = self.scan.reason
        return self.scan.verdict is Verdict.FAILED and reason is not None and reason.rank >= 3

    def updates(
        self, tick_s: float, loading_s: float | None = None, *, looks: bool = True
    ) -> Iterator[Update]:
        """Follow the log until the server's pid is gone (see LogFeed.updates); the node
        looks every `tick_s` once the port may be open, every `loading_s` before (never
        without `looks`: a watcher that only wants a death)."""
        look = look_spec(self.run, tick_s, loading_s) if looks else None
        self.following = True
        try:
            yield from self.log.updates(self.node, tick_s, look)
        finally:
            self.following = False

    def feed(self, chunk: bytes) -> bool:
        """Classify log bytes here (see LogFeed.feed)."""
        return self.log.feed(chunk)

    def fail(self, probe: Probe | None = None) -> Exception:
        """The error for a dead or failed run. Read on the node, the log's end is already
        known; read here, the end a dying server wrote is fetched first."""
        if self.log.node_side:
            probe = probe or self.last_probe  # the node's own look at the end, when it sent one
            if probe is None:
                probe = probe_run(self.node, self.run.rundir, self.run.port, 0, max_bytes=0)
            return crash_error(self.run, self.scan, self.tail, probe)
        while probe is None or probe.log_chunk:
            if probe is not None:
                self.log.feed(probe.log_chunk)
                if probe.log_size is not None and self.log.raw_offset >= probe.log_size:
                    break
            probe = probe_run(self.node, self.run.rundir, self.run.port, self.log.raw_offset)
        self.log.finish()
        return crash_error(self.run, self.scan, self.tail, probe)

    def _dead(self, probe: Probe) -> bool:
        """Whether the look's news ends the wait. Read on the node, a death waits (briefly)
        for the reader to send what the server wrote last; it ends its stream right after."""
        if self.scan.verdict is Verdict.FAILED:
            return True
        if probe.alive:
            self.dead_since = None
            return False
        if not self.log.node_side or self.log.final or not self.following:
            return True
        now = self.clock()
        self.dead_since = self.dead_since if self.dead_since is not None else now
        return now - self.dead_since >= DEAD_GRACE_S

    def look(self, timeout_s: float = 30.0, probe: Probe | None = None) -> WaitStatus:
        """Judge a look the node took (`probe`) or take one now; raise when the run is dead
        or has failed."""
        if probe is not None:
            self.last_probe = probe
            return self._judge(probe)
        wants_health = self.saw_listening or self.scan.phase.order >= Phase.HTTP_UP.order
        live = self.live_url if self.scan.phase is Phase.READY else ""
        # Read here, the probe also brings the log past our offset: unused while the server
        # lives (the stream delivers those bytes), it saves a round trip when it has just
        # died. Read on the node, the look carries no log at all.
        probe = probe_run(
            self.node,
            self.run.rundir,
            self.run.port,
            self.log.raw_offset,
            max_bytes=0 if self.log.node_side else LOOK_LOG_BYTES,
            health_url=(live or health_url(self.run)) if wants_health else "",
            timeout_s=timeout_s,
        )
        if live and probe.health == 404:  # this release has no such check: /health it is
            self.live_url = ""
            return self.look(timeout_s)
        return self._judge(probe)

    def _judge(self, probe: Probe) -> WaitStatus:
        if self._dead(probe):
            raise self.fail(probe)
        if not probe.ss_available:
            raise PreflightError(
                f"{self.run.host}: `ss` is not on the node, so firedup cannot tell whether our "
                f"server listens on port {self.run.port}; the server is still running",
                hint="install iproute2 on the node, then `fab wait` re-attaches",
            )
        self.saw_listening = self.saw_listening or probe.listening_ours
        now = self.clock()
        grew, self.seen_offset = self.offset > self.seen_offset, self.offset
        warning = self.stalls.observe(self.scan.phase, grew, now)
        return WaitStatus(
            run=self.run,
            signals=signals_from(probe, self.scan),
            scan=self.scan,
            log_offset=self.offset,
            elapsed_s=now - self.started,
            silent_s=self.stalls.silent_s(now),
            in_phase_s=now - self.stalls.phase_since,
            warning=warning,
        )
