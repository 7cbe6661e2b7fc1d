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

from firedup.errors import DeployError, LockedError, ServerCrashedError, TransientConnectError
from firedup.launch.runs import RunMeta
from firedup.node.base import Node
from firedup.node.lock import HeldLock
from firedup.ops.deploy import DeployPlan, Progress
from firedup.readiness.wait import WaitHooks, WaitOptions, wait_ready
from firedup.readiness.watch import RunWatcher, WaitStatus, tail_argv

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
        stream = self.rank.node.stream(tail_argv(self.run, watcher.offset), timeout_s=1.0)
        for chunk in stream:
            if self.stop.is_set():
                return
            if chunk:
                watcher.feed(chunk)
            if watcher.failed_for_sure:
                raise watcher.fail()

    def _keep_lock(self) -> None:
        """After a drop: refresh touches the node (reconnecting) and re-takes the lock if the
        holder's connection was the one that died."""
        if self.lock is not None and self.lock[0].refresh():
            self.lock[1](LOCK_RETAKEN)

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

        return wait_ready(ranks[0].node, runs[0], options, replace(hooks, guard=guard))
