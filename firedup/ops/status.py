"""What runs where: the state of a host's current run, read from the node."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from firedup.config.deployment import Deployment
from firedup.config.inventory import HostSpec
from firedup.launch.gpus import GpuMemory, gpu_memory
from firedup.launch.hostmem import HostMemoryUse, host_memory
from firedup.launch.runs import RunMeta, current_run, tail_log
from firedup.logscan import LogScanner, ScanState, Verdict
from firedup.node.base import Node
from firedup.node.lock import LockInfo, lock_status
from firedup.node.probe import Probe, probe_run
from firedup.ops.decode import DecodeStats, decode_stats
from firedup.ops.history import Action, HistoryRecord, read_history, stop_of
from firedup.patching.record import parse_record, record_path
from firedup.readiness.logfeed import read_once
from firedup.readiness.watch import Signals, health_url, look_spec, signals_from

MAX_STATUS_LOG_BYTES = 64 * 1024 * 1024
FIRST_LOG_BYTES = 64 * 1024  # past this, the log is classified on the node
DECODE_TAIL_LINES = 400


class RunState(StrEnum):
    NEVER = "never-deployed"
    STARTING = "starting"
    READY = "ready"
    UNHEALTHY = "unhealthy"  # the log said ready, but the port or /health no longer agree
    FAILED = "failed"
    EXITED = "exited"  # the process is gone without a fatal line in the log (killed)
    STOPPED = "stopped"  # the process is gone and the history says `fab stop` ended it


@dataclass(frozen=True)
class LastDeploy:
    run_id: str
    action: str
    outcome: str
    reason: str
    at: str


@dataclass(frozen=True)
class HostStatus:
    host: str
    state: RunState
    run: RunMeta | None = None
    signals: Signals | None = None
    scan: ScanState | None = None
    uptime_s: float | None = None
    gpus: tuple[GpuMemory, ...] | None = None
    patches: tuple[str, ...] = ()
    last_deploy: LastDeploy | None = None
    decode: DecodeStats | None = None
    lock: LockInfo | None = None
    memory: HostMemoryUse | None = None  # a node without GPUs (a CPU node): its memory


def scan_log(node: Node, run: RunMeta) -> tuple[Probe, ScanState]:
    """Probe the run and classify its whole log. A log that fits the first look's piece (a
    startup log usually does) is classified here from that one round trip; a longer one (days
    of decode lines, NCCL noise) on the node, by the wait's reader, so it never crosses the
    link; a node that cannot run the reader has it read here in pieces, each byte once."""
    url = health_url(run)
    first = probe_run(node, run.rundir, run.port, 0, max_bytes=FIRST_LOG_BYTES, health_url=url)
    if len(first.log_chunk) < (first.log_size or 0):
        on_node = read_once(node, run, look_spec(run, tick_s=1.0))
        if on_node is not None and on_node[1] is not None:
            return on_node[1], on_node[0]
    scanner = LogScanner(engine=run.engine)
    probe, offset = first, 0
    while True:
        scanner.feed(probe.log_chunk)
        offset += len(probe.log_chunk)
        if not probe.log_chunk or offset >= (probe.log_size or 0) or offset > MAX_STATUS_LOG_BYTES:
            break
        probe = probe_run(node, run.rundir, run.port, offset)
    if not first.alive:
        scanner.finish()
    return first, scanner.state


def state_of(probe: Probe, scan: ScanState) -> RunState:
    if scan.verdict is Verdict.FAILED:
        return RunState.FAILED
    if not probe.alive:
        return RunState.EXITED
    if scan.verdict is Verdict.READY:
        healthy = probe.listening_ours and probe.health == 200
        return RunState.READY if healthy else RunState.UNHEALTHY
    return RunState.STARTING


def applied_patches(node: Node, host: HostSpec) -> tuple[str, ...]:
    """The patches the node's record says are applied (empty when none ever were)."""
    path = record_path(host)
    raw = node.run(["cat", "--", path], check=False).stdout
    if not raw:
        return ()
    return tuple(sorted(parse_record(raw, path, host.name).patches))


def last_deploy(records: Sequence[HistoryRecord]) -> LastDeploy | None:
    starts = {Action.DEPLOY, Action.RESTART, Action.START}
    records = [r for r in records if r.action in starts]
    if not records:
        return None
    r = records[-1]
    at = r.at.isoformat(timespec="seconds")
    return LastDeploy(r.run_id or "", r.action.value, r.outcome.value, r.reason, at)


def host_status(node: Node, host: HostSpec, deployment: Deployment | None = None) -> HostStatus:
    """Everything `fab status` shows for one host; GPUs only when the deployment is given."""
    run = current_run(node, host)
    lock = lock_status(node, host)
    if run is None:
        return HostStatus(host=host.name, state=RunState.NEVER, lock=lock)
    probe, scan = scan_log(node, run)
    tail = tail_log(node, run, DECODE_TAIL_LINES).decode("utf-8", "replace")
    records = read_history(node, host, limit=50)
    state = state_of(probe, scan)
    if not probe.alive and stop_of(records, run.run_id) is not None:
        state = RunState.STOPPED  # what the history says, not "exited" as if it had died
    gpus = gpu_memory(node, host, deployment) if deployment else None
    cpu = deployment is not None and (gpus is None or host.accelerator == "cpu")
    return HostStatus(
        host=host.name,
        state=state,
        run=run,
        signals=signals_from(probe, scan),
        scan=scan,
        uptime_s=uptime(probe, run),
        gpus=gpus,
        memory=host_memory(node) if cpu else None,
        patches=applied_patches(node, host),
        last_deploy=last_deploy(records),
        decode=decode_stats(tail) if probe.alive else None,
        lock=lock,
    )


def uptime(probe: Probe, run: RunMeta) -> float | None:
    """How long the server has run, on one clock: the node's (its leader's age), else the
    operator's (the run was planned on it); never the node's now minus the operator's start."""
    if not probe.alive:
        return None
    if probe.leader_age_s is not None:
        return probe.leader_age_s
    return max(0.0, time.time() - run.started_at)
