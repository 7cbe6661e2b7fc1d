"""What runs where: the state of a host's current run, read from the node."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from firedup.config.deployment import Deployment
from firedup.config.inventory import HostSpec
from firedup.launch.gpus import GpuMemory, gpu_memory
from firedup.launch.hostmem import HostMemoryUse, host_memory
from firedup.launch.keepalive import WatchView, read_watch
from firedup.launch.runs import RunMeta, current_run, tail_log
from firedup.logscan import LogScanner, Phase, ScanState, Verdict
from firedup.node.base import Node
from firedup.node.lock import LockInfo, lock_status
from firedup.node.probe import Probe, probe_run
from firedup.ops.decode import DecodeStats, decode_stats
from firedup.ops.facts import NodeFacts, gather_facts
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
    FOLLOWER = "follower"  # a live rank >= 1: its readiness is rank 0's, not asked in this call


@dataclass(frozen=True)
class DownRank:
    host: str
    node_rank: int
    state: RunState


@dataclass(frozen=True)
class RankView:
    """A multi-node run's place, and what this status call saw of the other ranks."""

    node_rank: int
    nnodes: int
    rank0_host: str | None
    rank0_state: str | None = None  # rank 0's state when the same call asked it
    down: tuple[DownRank, ...] = ()  # the deployment's ranks this call saw dead
    asked: int = 1  # how many of the deployment's ranks this call asked, this one included

    def text(self) -> str:
        if self.node_rank == 0:
            parts = [f"rank 0 of {self.nnodes}"]
            if self.asked < self.nnodes:  # a dead follower would not show: say so
                parts.append(f"only {self.asked} of {self.nnodes} ranks asked")
        else:
            parts = [
                f"rank {self.node_rank} of {self.nnodes}, readiness is rank 0's ({self.rank0_host})"
            ]
            if self.rank0_state is not None:
                parts.append(f"rank 0 {self.rank0_state}")
        parts += [f"rank {d.node_rank} on {d.host} {d.state.value}" for d in self.down]
        return ", ".join(parts)

    def to_json(self) -> dict[str, Any]:
        down = [
            {"host": d.host, "node_rank": d.node_rank, "state": d.state.value} for d in self.down
        ]
        return {
            "node_rank": self.node_rank,
            "nnodes": self.nnodes,
            "rank0_host": self.rank0_host,
            "rank0_state": self.rank0_state,
            "down": down,
            "asked": self.asked,
        }


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
    watch: WatchView | None = None  # the node-side watch's view of the run (issue 25)
    log_refused: str | None = None  # why the log was not read (not a regular file)
    memory: HostMemoryUse | None = None  # a node without GPUs (a CPU node): its memory
    rank: RankView | None = None  # a multi-node run's rank (firedup/ops/ranks.py joins them)


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
        return RunState.READY if _serving_after(probe, scan) else RunState.FAILED
    if not probe.alive:
        return RunState.EXITED
    if scan.verdict is Verdict.READY:
        healthy = probe.listening_ours and probe.health == 200
        return RunState.READY if healthy else RunState.UNHEALTHY
    return RunState.STARTING


def _serving_after(probe: Probe, scan: ScanState) -> bool:
    """A fatal-looking line after ready while the live signals say the server is up: its
    process alive, its port ours, /health 200. The log's words lose to what the server does."""
    after_ready = any(span.phase is Phase.READY for span in scan.phases)
    return after_ready and probe.alive and probe.listening_ours and probe.health == 200


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
    """Everything `fab status` shows for one host; GPUs only when the deployment is given.
    One round trip (ops/facts.py) where the node runs python3; fact by fact where not."""
    facts = gather_facts(node, host, deployment)
    status = status_of(host, facts) if facts is not None else None
    status = status or _host_status_by_fact(node, host, deployment)
    cpu = status.gpus is None or host.accelerator == "cpu"  # a CPU node: its memory instead
    if deployment is not None and status.run is not None and cpu:
        status = replace(status, memory=host_memory(node))
    return status


def status_of(host: HostSpec, facts: NodeFacts) -> HostStatus:
    """What the node's facts say (pure)."""
    run, probe, scan = facts.run, facts.probe, facts.scan
    if run is None or probe is None:
        state = RunState.NEVER if run is None else RunState.STARTING
        return HostStatus(
            host=host.name,
            state=state,
            run=run,
            lock=facts.lock,
            log_refused=facts.log_refused,
            rank=rank_view(run) if run is not None else None,
        )
    if scan is None:  # no log to read (not yet written, or refused): nothing it said counts
        scan = LogScanner(engine=run.engine).state
    state = state_of(probe, scan)
    if not probe.alive and stop_of(facts.history, run.run_id) is not None:
        state = RunState.STOPPED
    if run.follower and state in LIVE:  # no ready line of its own: rank 0's says it
        state = RunState.FOLLOWER
    return HostStatus(
        host=host.name,
        state=state,
        run=run,
        signals=signals_from(probe, scan),
        scan=scan,
        uptime_s=uptime(probe, run),
        gpus=facts.gpus,
        patches=facts.patches,
        last_deploy=last_deploy(facts.history),
        decode=decode_stats(facts.decode_tail) if probe.alive else None,
        lock=facts.lock,
        watch=facts.watch,
        log_refused=facts.log_refused,
        rank=rank_view(run),
    )


# A live process whose log said nothing fatal: what a follower is until rank 0 says more.
LIVE = frozenset({RunState.STARTING, RunState.READY, RunState.UNHEALTHY})


def rank_view(run: RunMeta) -> RankView | None:
    return RankView(run.node_rank, run.nnodes, run.rank0_host) if run.nnodes > 1 else None


def _host_status_by_fact(node: Node, host: HostSpec, deployment: Deployment | None) -> HostStatus:
    """The same facts asked one command at a time (a node without python3 >= 3.8)."""
    run = current_run(node, host)
    lock = lock_status(node, host)
    if run is None:
        return HostStatus(host=host.name, state=RunState.NEVER, lock=lock)
    probe, scan = scan_log(node, run)
    facts = NodeFacts(
        node_time=probe.node_time,
        run=run,
        lock=lock,
        history=tuple(read_history(node, host, limit=50)),
        patches=applied_patches(node, host),
        probe=probe,
        scan=scan,
        log_size=probe.log_size,
        log_refused=None,
        decode_tail=tail_log(node, run, DECODE_TAIL_LINES).decode("utf-8", "replace"),
        gpus=gpu_memory(node, host, deployment) if deployment else None,
        metrics=None,
        watch=read_watch(node, run.rundir),
    )
    return status_of(host, facts)


def uptime(probe: Probe, run: RunMeta) -> float | None:
    """How long the server has run, on one clock: the node's (its leader's age), else the
    operator's (the run was planned on it); never the node's now minus the operator's start."""
    if not probe.alive:
        return None
    if probe.leader_age_s is not None:
        return probe.leader_age_s
    return max(0.0, time.time() - run.started_at)
