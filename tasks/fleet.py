"""A fleet on one board: the selected units (a host, or the nodes of a multi-node
deployment), each deployed or waited for on its own row, in parallel; the one summary and
exit rule at the end. `fab deploy`, `restart` (also `--rolling`, batch by batch) and `wait`
run through it."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from invoke.context import Context

from firedup.config.inventory import Inventory
from firedup.errors import DeployError, ServerCrashedError, UsageError, WaitInterrupted
from firedup.launch.runs import RunMeta, is_alive
from firedup.node.base import Node
from firedup.ops.results import HostResults
from firedup.readiness.report import table
from firedup.readiness.watch import WaitStatus

from .common import connected, exit_by_rule, fitted, limit_connecting, per_host, say
from .progress import Board, HostView, Mode, Output
from .shown import shown


def _ready_message(key: str, status: WaitStatus) -> str:
    run = status.run
    where = f" (rank 0 on {run.host})" if key != run.host else ""
    return (
        f"{key}: READY  run {run.run_id}{where}, {run.engine.value} on port {run.port}, "
        f"pid {run.pid}, after {status.elapsed_s:.0f}s"
    )


class Launches(dict[str, RunMeta]):
    """The runs started so far, per host, and the hosts whose start had begun (its answer, the
    pid, may not have come back yet)."""

    def __init__(self) -> None:
        super().__init__()
        self.launching: set[str] = set()


def _interrupted(started: Launches, selector: str) -> WaitInterrupted:
    """Ctrl-C stops waiting, never the servers: say so and how to come back."""
    if not started and not started.launching:
        return WaitInterrupted(
            "interrupted before the launch (preflight or patches); no server was started",
            hint=f"`fab deploy --host {selector}` when ready",
        )
    if not started:
        # The start may have run on the node before its answer reached us: do not deny it.
        return WaitInterrupted(
            "interrupted during the launch; if it got as far as the start, the server keeps "
            "running",
            hint=f"`fab status --host {selector}` shows it; `fab wait --host {selector}` "
            "re-attaches",
        )
    runs = ", ".join(f"{h} (run {r.run_id}, pid {r.pid})" for h, r in started.items())
    names = ",".join(started)
    return WaitInterrupted(
        f"interrupted; the server keeps running: {runs}",
        hint=f"re-attach with `fab wait --host {names}`; stop with `fab stop --host {names}`",
    )


def _finish(results: HostResults[WaitStatus], quiet: bool = False) -> None:
    """One host: its message or its error. Several: a table, exit non-zero on any failure.
    `quiet` (--json): stdout carries only the events; errors still go to stderr."""
    if len(results) == 1:
        ((key, only),) = results.items()
        if isinstance(only, DeployError):
            raise only
        if not quiet:
            say(fitted(_ready_message(key, only), sys.stdout))
        return
    rows = []
    for host, result in results.items():
        if isinstance(result, DeployError):
            first = str(result).splitlines()[0]
            rows.append([host, "FAILED", "-", f"{type(result).__name__}: {first}"])
        else:
            rows.append(
                [
                    host,
                    "READY",
                    result.run.run_id,
                    f"port {result.run.port}, {result.elapsed_s:.0f}s",
                ]
            )
    if not quiet:
        say(table(["HOST", "RESULT", "RUN", "DETAIL"], rows))
    exit_by_rule(results)


Work = Callable[[Context, Inventory, list[str], HostView, Launches], WaitStatus]


def units_of(inv: Inventory, selector: str) -> list[list[str]]:
    """Selected hosts as units: one host, or every node of a multi-node deployment in rank
    order (a multi-node deployment is deployed and waited for as a whole, or not at all)."""
    units: list[list[str]] = []
    names = [spec.name for spec in inv.select(selector)]
    for name in names:
        nodes = inv.deployment_for(inv.host(name)).nodes
        if not nodes:
            units.append([name])
            continue
        missing = [n for n in nodes if n not in names]
        if missing:
            raise UsageError(
                f"{name} is one of the nodes of multi-node deployment "
                f"{inv.host(name).deployment}; select them all: --host {','.join(nodes)}"
            )
        if nodes not in units:
            units.append(list(nodes))
    return units


SETTLE_S = 8.0  # how long a failed server's processes get to exit by themselves


def exits_within(node: Node, run: RunMeta, timeout_s: float) -> float | None:
    """Seconds until the run's processes were all gone, or None if they outlived timeout_s."""
    start = time.monotonic()
    while is_alive(node, run):
        if time.monotonic() - start > timeout_s:
            return None
        time.sleep(0.25)
    return time.monotonic() - start


class Fleet:
    """The selected units on one board: `run(keys)` deploys those units in parallel, each on
    its row (a rolling restart calls it batch by batch). Ctrl-C ends the command, never a
    server; the board is closed however it ends."""

    def __init__(self, c: Context, inv: Inventory, selector: str, output: Output, work: Work):
        self.c, self.inv, self.work = c, inv, work
        self.units = {",".join(unit): unit for unit in units_of(inv, selector)}
        self.mode = output.mode()
        self.board = Board(list(self.units), follow=output.follow, mode=self.mode)
        self.started = Launches()

    def run(self, keys: list[str]) -> HostResults[WaitStatus]:
        return per_host(keys, self._one)

    def _one(self, key: str) -> WaitStatus:
        unit = self.units[key]
        try:
            return self.board.watch(
                key, lambda: self.work(self.c, self.inv, unit, self.board.view(key), self.started)
            )
        except ServerCrashedError as exc:
            run = self.started.get(unit[0])
            if exc.running and run is not None and self.mode is not Mode.JSON:
                self._settle(unit[0], run)
            raise

    def _settle(self, name: str, run: RunMeta) -> None:
        """After a failure read while the server still ran: did it exit by itself (vLLM tears
        its engine down for seconds), or is it stuck? Told once, after the verdict."""
        try:
            with connected(self.c, self.inv, name) as node:
                gone_s = exits_within(node, run, SETTLE_S)
        except DeployError:
            return
        if gone_s is None:
            text = (
                f"[{name}] run {run.run_id} is still running {SETTLE_S:.0f}s after its failure: "
                f"`fab stop --host {name}` ends it"
            )
        else:
            text = (
                f"[{name}] run {run.run_id}: its processes exited by themselves {gone_s:.1f}s later"
            )
        print(shown(text), file=sys.stderr, flush=True)

    def __enter__(self) -> Fleet:
        return self

    def __exit__(self, kind: object, exc: object, tb: object) -> None:
        if isinstance(exc, KeyboardInterrupt):
            error = _interrupted(self.started, ",".join(self.units))
            self.board.interrupted(error)
            self.board.close()
            raise error from None
        self.board.close()


def run_fleet(
    c: Context, inv: Inventory, selector: str, output: Output, work: Work, max_parallel: int = 0
) -> None:
    limit_connecting(c, max_parallel)
    with Fleet(c, inv, selector, output, work) as fleet:
        results = fleet.run(list(fleet.units))
    _finish(results, quiet=fleet.mode is Mode.JSON)
