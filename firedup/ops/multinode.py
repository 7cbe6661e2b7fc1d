"""A deployment spread over several nodes: every rank starts, rank 0 decides readiness.

Each node gets its own script (--nnodes, --node-rank, --dist-init-addr = rank 0's address),
its own lock, preflight, patches and history record (the deploy itself is firedup.ops.apply,
the same path as for one node). While rank 0 is waited for as usual, a thread per other rank
follows its log and liveness, and re-takes that rank's lock after a reconnect; the first rank
to die ends the wait at once, naming the rank and the host.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace

from firedup.errors import (
    DeployError,
    ForeignListenerError,
    LockedError,
    NotReadyError,
    ServerCrashedError,
    TransientConnectError,
)
from firedup.launch.runs import RunMeta, is_alive
from firedup.node.base import Node
from firedup.node.lock import HeldLock, mark_waiting
from firedup.ops.deploy import DeployPlan, Progress, record, stopped_during_wait
from firedup.ops.handoff import handoff_of, join
from firedup.ops.history import Action, outcome_of, read_history, stop_of
from firedup.ops.ready_request import confirm_serving
from firedup.readiness.wait import WaitHooks, WaitOptions, wait_ready
from firedup.readiness.watch import RunWatcher, WaitStatus

LOCK_RETAKEN = "the node's lock was lost with the connection; taken again"
# A rank's lock and where to say that it was re-taken: a deploy holds one per rank >= 1.
KeptLocks = Mapping[int, tuple[HeldLock, Progress]]


@dataclass(frozen=True)
class Rank:
    rank: int
    node: Node
    plan: DeployPlan


class RankWatch:
    """Follows one non-zero rank in a thread and keeps the first sign of its death; when a
    deploy holds the rank's lock, re-takes it after a reconnect (this thread is the one using
    that rank's connection during the wait)."""

    def __init__(
        self,
        rank: Rank,
        run: RunMeta,
        stop: threading.Event,
        lock: tuple[HeldLock, Progress] | None = None,
    ) -> None:
        self.rank = rank
        self.run = run
        self.stop = stop
        self.lock = lock
        self.failure: DeployError | None = None
        self.thread = threading.Thread(
            target=self._watch, daemon=True, name=f"firedup-rank{rank.rank}"
        )

    def _follow(self, watcher: RunWatcher) -> None:
        watcher.look()  # raises when the rank is already dead
        for _update in watcher.updates(1.0, looks=False):
            if self.stop.is_set():
                return
            if watcher.failed_for_sure:
                raise watcher.fail()

    def _keep_lock(self) -> None:
        """After a drop: refresh touches the node (reconnecting) and re-takes the lock if the
        holder's connection was the one that died."""
        if self.lock is not None and self.lock[0].refresh():
            self.lock[1](LOCK_RETAKEN)
            lock = self.lock[0]
            mark_waiting(lock.node, lock.host, lock)  # `fab stop` may take it over again

    def _watch(self) -> None:
        watcher = RunWatcher(self.rank.node, self.run, time.monotonic)
        dropped = False
        while not self.stop.is_set():
            try:
                if dropped:
                    self._keep_lock()  # before following again: the lock comes first
                    dropped = False
                self._follow(watcher)
            except TransientConnectError:
                dropped = True
                self.stop.wait(1.0)  # reconnect on the next round, at the same offset
            except DeployError as exc:
                self.failure = exc
                return

    def check(self) -> None:
        if isinstance(self.failure, LockedError):
            raise self.failure  # someone took the node while the link was down: say who
        if self.failure is not None:
            host = self.rank.plan.host.name
            first = str(self.failure).split("\n", 1)[0]
            raise ServerCrashedError(
                f"rank {self.rank.rank} on {host} failed, so the deployment cannot come up: "
                f"{first}",
                hint=f"`fab logs --host {host}` shows its log; `fab stop --host "
                f"{','.join(self.rank.plan.deployment.nodes)}` stops every rank",
            )


@contextmanager
def watching(
    ranks: Sequence[Rank], runs: Sequence[RunMeta], locks: KeptLocks | None = None
) -> Iterator[Callable[[], None]]:
    """Follow ranks 1..n in threads for the block; yield the guard that raises on a death."""
    stop = threading.Event()
    watches = [
        RankWatch(r, run, stop, (locks or {}).get(r.rank))
        for r, run in zip(ranks[1:], runs[1:], strict=True)
    ]
    for watch in watches:
        watch.thread.start()

    def guard() -> None:
        for watch in watches:
            watch.check()

    try:
        yield guard
    finally:
        stop.set()
        for watch in watches:
            watch.thread.join(5)


def wait_multinode(
    ranks: Sequence[Rank],
    runs: Sequence[RunMeta],
    options: WaitOptions,
    hooks: WaitHooks,
    *,
    locks: KeptLocks | None = None,
) -> WaitStatus:
    """Rank 0's readiness, ended at once by any other rank's death (also for `fab wait`)."""
    with watching(ranks, runs, locks) as ranks_alive:

        def guard() -> None:
            hooks.guard()  # the caller's own guard runs too
            ranks_alive()

        status = wait_ready(ranks[0].node, runs[0], options, replace(hooks, guard=guard))
    first = ranks[0]
    confirm_serving(first.node, first.plan.host, first.plan.deployment, runs[0])
    return status


STOP_LOOKBACK = 50  # history records `fab wait` reads to learn whether its run was stopped

# What a wait observed about the server itself (not an interrupt, not a lost connection).
OBSERVED = (ServerCrashedError, NotReadyError, ForeignListenerError)


def wait_recorded(
    ranks: Sequence[Rank],
    runs: Sequence[RunMeta],
    options: WaitOptions,
    hooks: WaitHooks,
    on_progress: Callable[[str], None] = lambda _m: None,
) -> WaitStatus:
    """`fab wait`: refuse a run that `fab stop` ended, else wait and record what was seen in
    each rank's history, so a crash only this wait saw keeps its log through pruning. A
    ready worker behind a router is handed to it, as a deploy does (`fab start` + `fab wait`
    is the same deploy in two steps)."""
    for r, run in zip(ranks, runs, strict=True):
        stopped = stop_of(read_history(r.node, r.plan.host, STOP_LOOKBACK), run.run_id)
        if stopped is not None and not is_alive(r.node, run):
            raise DeployError(
                f"{run.host}: run {run.run_id} was stopped by {stopped.who} at "
                f"{stopped.at:%Y-%m-%d %H:%M:%S} UTC; nothing to wait for",
                hint=f"`fab deploy --host {run.host}` starts it again",
            )
    try:
        status = wait_multinode(ranks, runs, options, hooks)
    except OBSERVED as exc:
        by_stop = stopped_during_wait(ranks[0].node, ranks[0].plan, runs[0], exc)
        if by_stop is not None:
            raise by_stop from None  # `fab stop` recorded it; a stop is no failure to keep
        for r, run in zip(ranks, runs, strict=True):
            record(r.node, r.plan, run, Action.WAIT, outcome_of(exc))
        raise
    for r, run in zip(ranks, runs, strict=True):
        scan = status.scan if r is ranks[0] else None
        record(r.node, r.plan, run, Action.WAIT, outcome_of(None), scan=scan)
    handoff = handoff_of(ranks[0].node, ranks[0].plan.host, ranks[0].plan.deployment)
    if handoff is not None:
        join(handoff, on_progress)
    return status
