"""One deploy path, for one node or for every node of a multi-node deployment.

lock -> preflight -> sync patches -> start -> wait -> record -> prune, rank by rank: every
node's lock is taken and every node prepared before any starts, so a preflight failure on one
node launches nothing anywhere; rank 0 decides readiness while the other ranks are watched
(firedup.ops.multinode). A lock lives on its node's connection: after a reconnect it is taken
again, on every rank, by whoever uses that connection during the wait (rank 0's in the wait
loop's guard, each other rank's in its watcher thread), before anything else is done there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import replace

from firedup.errors import DeployError, TransientConnectError
from firedup.launch.runs import RunMeta
from firedup.node.base import Node
from firedup.node.lock import HeldLock, mark_waiting, node_lock
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
from firedup.ops.handoff import handoff_of, join, leave_before_restart
from firedup.ops.history import Outcome, outcome_of
from firedup.ops.keep import start_watch
from firedup.ops.multinode import LOCK_RETAKEN, Rank, wait_multinode
from firedup.readiness.wait import NO_HOOKS, WaitHooks, WaitOptions
from firedup.readiness.watch import WaitStatus

STARTED = (Outcome.STARTED, "started; waiting for ready")

HostProgress = Callable[[str, str], None]
PLAIN_DEPLOY = DeployOptions()


def _quiet(_host: str, _message: str) -> None:
    return None


def apply_deploy(
    node: Node,
    plan: DeployPlan,
    options: WaitOptions,
    hooks: WaitHooks = NO_HOOKS,
    *,
    how: DeployOptions = PLAIN_DEPLOY,
    on_progress: Progress = lambda _m: None,
    on_started: Callable[[RunMeta], None] = lambda _r: None,
    on_launching: Callable[[str], None] = lambda _host: None,
) -> WaitStatus:
    """One node: the same path as several, with one rank."""
    return deploy_ranks(
        [Rank(0, node, plan)],
        options,
        hooks,
        how=how,
        on_progress=lambda _host, message: on_progress(message),
        on_started=on_started,
        on_launching=on_launching,
    )


def deploy_ranks(
    ranks: Sequence[Rank],
    options: WaitOptions,
    hooks: WaitHooks = NO_HOOKS,
    *,
    how: DeployOptions,
    on_progress: HostProgress = _quiet,
    on_started: Callable[[RunMeta], None] = lambda _r: None,
    on_launching: Callable[[str], None] = lambda _host: None,
) -> WaitStatus:
    """Lock, prepare and start every rank, then wait for rank 0 while watching the others.

    `on_launching(host)` comes just before the starts: until then an interrupt leaves no
    server; after it, a server may run even if its pid never came back."""

    def say(rank: Rank) -> Progress:
        return lambda message: on_progress(rank.plan.host.name, message)

    with ExitStack() as stack:
        locks = [
            stack.enter_context(
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
        for rank, lock in zip(ranks, locks, strict=True):
            # A drop while preparing reconnected silently and ended that node's lock holder:
            # take it back (or learn who took the node) before anything is started.
            if lock.refresh():
                say(rank)(LOCK_RETAKEN)
        if how.restart:
            leave_before_restart(
                ranks[0].node, ranks[0].plan.host, ranks[0].plan.deployment, say(ranks[0])
            )
        for rank in ranks:
            on_launching(rank.plan.host.name)
        runs = [
            start_plan(
                r.node,
                r.plan,
                restart=how.restart,
                force=how.force,
                engine_version=v,
                on_progress=say(r),
            )
            for r, v in zip(ranks, versions, strict=True)
        ]
        for rank, run in zip(ranks, runs, strict=True):
            # Recorded now: a deploy killed while it waits (kill -9, a closed laptop) still
            # leaves its run in the history; the outcome follows in its own line.
            record(rank.node, rank.plan, run, how.action, STARTED, on_progress=say(rank))
            on_started(run)
        for rank, lock in zip(ranks, locks, strict=True):
            mark_waiting(rank.node, rank.plan.host, lock)  # now `fab stop` may take it over
        status = _wait_and_record(ranks, locks, runs, options, hooks, how, say)
        _join_when_ready(ranks[0], say(ranks[0]))
        return status


def _join_when_ready(rank0: Rank, say: Progress) -> None:
    """Only a truly ready worker (the four signals agreed) is handed to its router."""
    handoff = handoff_of(rank0.node, rank0.plan.host, rank0.plan.deployment)
    if handoff is not None:
        join(handoff, say)


class _Retaker:
    """Rank 0's lock during the wait: re-taken in the wait loop's guard once the loop said it
    reconnected (before its next look: refresh itself reconnects) or the connection changed."""

    def __init__(self, lock: HeldLock, say: Progress) -> None:
        self.lock, self.say, self.pending = lock, say, False

    def reconnected(self) -> None:
        self.pending = True

    def check(self) -> None:
        if not self.pending and self.lock.node.generation == self.lock.generation:
            return
        try:
            if self.lock.refresh():
                self.say(LOCK_RETAKEN)
                mark_waiting(self.lock.node, self.lock.host, self.lock)
            self.pending = False
        except TransientConnectError:
            pass  # still away: the next look tries again


def _wait_and_record(
    ranks: Sequence[Rank],
    locks: Sequence[HeldLock],
    runs: Sequence[RunMeta],
    options: WaitOptions,
    hooks: WaitHooks,
    how: DeployOptions,
    say: Callable[[Rank], Progress],
) -> WaitStatus:
    seen: list[WaitStatus] = []

    def remember(status: WaitStatus) -> None:
        seen[:] = [status]
        hooks.on_status(status)

    rank0 = _Retaker(locks[0], say(ranks[0]))

    def reconnected(message: str) -> None:
        hooks.on_reconnect(message)
        rank0.reconnected()

    def guard() -> None:
        hooks.guard()
        rank0.check()

    watched = replace(hooks, on_status=remember, on_reconnect=reconnected, guard=guard)
    others = {r.rank: (lock, say(r)) for r, lock in zip(ranks[1:], locks[1:], strict=True)}
    try:
        status = wait_multinode(ranks, runs, options, watched, locks=others)
    except (DeployError, KeyboardInterrupt) as exc:
        # A server `fab stop` ended from elsewhere while we waited is a stop, not a crash.
        stopped = stopped_during_wait(ranks[0].node, ranks[0].plan, runs[0], exc)
        outcome = (Outcome.STOPPED, str(stopped)) if stopped else outcome_of(exc)
        for r, run in zip(ranks, runs, strict=True):
            scan = seen[0].scan if seen and r is ranks[0] else None
            record(r.node, r.plan, run, how.action, outcome, scan=scan, on_progress=say(r))
        if stopped is not None:
            raise stopped from None
        raise
    for r, run in zip(ranks, runs, strict=True):
        scan = status.scan if r is ranks[0] else None
        record(r.node, r.plan, run, how.action, outcome_of(None), scan=scan, on_progress=say(r))
        prune(r.node, r.plan.host, say(r))
        start_watch(r.node, r.plan, run, say(r))  # only for a deployment that asks for it
    return status
