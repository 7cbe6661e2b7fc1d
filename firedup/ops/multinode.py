"""A deployment spread over several nodes: every rank starts, rank 0 decides readiness.

Each node gets its own script (--nnodes, --node-rank, --dist-init-addr = rank 0's address),
its own lock, preflight, patches and history record. All ranks are prepared before any
starts, so a preflight failure on one node launches nothing anywhere. While rank 0 is waited
for as usual, a thread per other rank follows its log and liveness; the first rank to die
ends the wait at once, naming the rank and the host.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace

from firedup.errors import (
    DeployError,
    ForeignListenerError,
    NotReadyError,
    ServerCrashedError,
    TransientConnectError,
)
from firedup.launch.runs import RunMeta, is_alive
from firedup.node.base import Node
from firedup.node.lock import node_lock
from firedup.ops.deploy import (
    DeployOptions,
    DeployPlan,
    Progress,
    prepare,
    prune,
    record,
    start_plan,
    stopped_during_wait,
)
from firedup.ops.history import Action, outcome_of, read_history, stop_of
from firedup.readiness.wait import NO_HOOKS, WaitHooks, WaitOptions, wait_ready
from firedup.readiness.watch import RunWatcher, WaitStatus


@dataclass(frozen=True)
class Rank:
    rank: int
    node: Node
    plan: DeployPlan


class RankWatch:
    """Follows one non-zero rank in a thread and keeps the first sign of its death."""

    def __init__(self, rank: Rank, run: RunMeta, stop: threading.Event) -> None:
        self.rank = rank
        self.run = run
        self.stop = stop
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

    def _watch(self) -> None:
        watcher = RunWatcher(self.rank.node, self.run, time.monotonic)
        while not self.stop.is_set():
            try:
                self._follow(watcher)
            except TransientConnectError:
                self.stop.wait(1.0)  # reconnect on the next round, at the same offset
            except DeployError as exc:
                self.failure = exc
                return

    def check(self) -> None:
        if self.failure is not None:
            host = self.rank.plan.host.name
            first = str(self.failure).split("\n", 1)[0]
            raise ServerCrashedError(
                f"rank {self.rank.rank} on {host} failed, so the deployment cannot come up: "
                f"{first}",
                hint=f"`fab logs --host {host}` shows its log; `fab stop --host "
                f"{','.join(self.rank.plan.deployment.nodes)}` stops every rank",
            )


def apply_multinode(
    ranks: Sequence[Rank],
    options: WaitOptions,
    hooks: WaitHooks = NO_HOOKS,
    *,
    how: DeployOptions,
    on_progress: Callable[[str, str], None] = lambda _host, _m: None,
    on_started: Callable[[RunMeta], None] = lambda _r: None,
    on_launching: Callable[[str], None] = lambda _host: None,
) -> WaitStatus:
    """Lock, prepare and start every rank, then wait for rank 0 while watching the others."""

    def say(rank: Rank) -> Progress:
        return lambda message: on_progress(rank.plan.host.name, message)

    with ExitStack() as locks:
        held = [
            locks.enter_context(
                node_lock(
                    r.node,
                    r.plan.host,
                    how.action.value,
                    force=how.force_unlock,
                    detail=r.plan.run_id,
                    on_progress=say(r),
                )
            )
            for r in ranks
        ]
        versions = [prepare(r.node, r.plan, how, say(r)).engine_version for r in ranks]
        for lock in held:
            lock.refresh()  # a drop while preparing ended that node's holder: take it back
        for r in ranks:
            on_launching(r.plan.host.name)
        runs = [
            start_plan(r.node, r.plan, restart=how.restart, engine_version=v, on_progress=say(r))
            for r, v in zip(ranks, versions, strict=True)
        ]
        for run in runs:
            on_started(run)
        return _wait_rank0(ranks, runs, options, hooks, how, say)


@contextmanager
def watching(ranks: Sequence[Rank], runs: Sequence[RunMeta]) -> Iterator[Callable[[], None]]:
    """Follow ranks 1..n in threads for the block; yield the guard that raises on a death."""
    stop = threading.Event()
    watches = [RankWatch(r, run, stop) for r, run in zip(ranks[1:], runs[1:], strict=True)]
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
    ranks: Sequence[Rank], runs: Sequence[RunMeta], options: WaitOptions, hooks: WaitHooks
) -> WaitStatus:
    """Rank 0's readiness, ended at once by any other rank's death (also for `fab wait`)."""
    with watching(ranks, runs) as guard:
        return wait_ready(ranks[0].node, runs[0], options, replace(hooks, guard=guard))


STOP_LOOKBACK = 50  # history records `fab wait` reads to learn whether its run was stopped

# What a wait observed about the server itself (not an interrupt, not a lost connection).
OBSERVED = (ServerCrashedError, NotReadyError, ForeignListenerError)


def wait_recorded(
    ranks: Sequence[Rank], runs: Sequence[RunMeta], options: WaitOptions, hooks: WaitHooks
) -> WaitStatus:
    """`fab wait`: refuse a run that `fab stop` ended, else wait and record what was seen in
    each rank's history, so a crash only this wait saw keeps its log through pruning."""
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
    return status


def _wait_rank0(
    ranks: Sequence[Rank],
    runs: list[RunMeta],
    options: WaitOptions,
    hooks: WaitHooks,
    how: DeployOptions,
    say: Callable[[Rank], Progress],
) -> WaitStatus:
    try:
        status = wait_multinode(ranks, runs, options, hooks)
    except (DeployError, KeyboardInterrupt) as exc:
        for r, run in zip(ranks, runs, strict=True):
            record(r.node, r.plan, run, how.action, outcome_of(exc), on_progress=say(r))
        raise
    for r, run in zip(ranks, runs, strict=True):
        scan = status.scan if r is ranks[0] else None
        record(r.node, r.plan, run, how.action, outcome_of(None), scan=scan, on_progress=say(r))
        prune(r.node, r.plan.host, say(r))
    return status
