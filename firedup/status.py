"""What runs where: the state of a host's current run, read from the node."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from firedup.inventory import HostSpec
from firedup.logscan import LogScanner, ScanState, Verdict
from firedup.node import Node
from firedup.probe import Probe, probe_run
from firedup.readiness import Signals, health_url, signals_from
from firedup.runs import RunMeta, current_run

MAX_STATUS_LOG_BYTES = 64 * 1024 * 1024


class RunState(StrEnum):
    NEVER = "never-deployed"
    STARTING = "starting"
    READY = "ready"
    FAILED = "failed"
    EXITED = "exited"  # the process is gone without a fatal line in the log (stopped, killed)


@dataclass(frozen=True)
class HostStatus:
    host: str
    state: RunState
    run: RunMeta | None = None
    signals: Signals | None = None
    scan: ScanState | None = None
    uptime_s: float | None = None


def scan_log(node: Node, run: RunMeta) -> tuple[Probe, ScanState]:
    """Probe the run and classify its whole log (read in chunks, each byte once)."""
    scanner = LogScanner(engine=run.engine)
    offset = 0
    first: Probe | None = None
    url = health_url(run)
    while True:
        probe = probe_run(node, run.rundir, run.port, offset, health_url="" if first else url)
        first = first or probe
        scanner.feed(probe.log_chunk)
        offset += len(probe.log_chunk)
        if not probe.log_chunk or offset >= (probe.log_size or 0) or offset > MAX_STATUS_LOG_BYTES:
            break
    if not first.alive:
        scanner.finish()
    return first, scanner.state


def state_of(probe: Probe, scan: ScanState) -> RunState:
    if scan.verdict is Verdict.FAILED:
        return RunState.FAILED
    if not probe.alive:
        return RunState.EXITED
    if scan.verdict is Verdict.READY and probe.listening_ours and probe.health == 200:
        return RunState.READY
    return RunState.STARTING


def host_status(node: Node, host: HostSpec) -> HostStatus:
    run = current_run(node, host)
    if run is None:
        return HostStatus(host=host.name, state=RunState.NEVER)
    probe, scan = scan_log(node, run)
    return HostStatus(
        host=host.name,
        state=state_of(probe, scan),
        run=run,
        signals=signals_from(probe, scan),
        scan=scan,
        uptime_s=probe.node_time - run.started_at if probe.alive else None,
    )
