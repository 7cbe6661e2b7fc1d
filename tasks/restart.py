"""`fab restart`: stop the running server and deploy it again, every selected host at once,
or `--rolling`: batch by batch behind a router, never the last healthy worker, stopped at
the first new worker that fails (docs/router.md)."""

from __future__ import annotations

import sys
from collections.abc import Callable

from invoke.context import Context

from firedup.config.inventory import Inventory
from firedup.errors import StartError, UsageError
from firedup.launch.runs import current_run
from firedup.ops.deploy import DeployOptions, is_alive
from firedup.ops.handoff import handoff_of, serving_beside, worker_url
from firedup.ops.history import Action
from firedup.ops.rolling import RollOutcome, roll
from firedup.readiness.report import table

from .common import (
    INVENTORY_HELP,
    connected,
    get_inventory,
    reporting,
    require_host,
    say,
    task,
    whole,
)
from .deploy import (
    FOLLOW_HELP,
    FORCE_HELP,
    HOSTS_HELP,
    JSON_HELP,
    PLAIN_HELP,
    POLL_HELP,
    TIMEOUT_HELP,
    UNLOCK_HELP,
    _deploy_one,
    _knobs,
)
from .fleet import Fleet, run_fleet
from .progress import Output
from .shown import shown


@task(
    help={
        "host": HOSTS_HELP,
        "inventory": INVENTORY_HELP,
        "timeout": TIMEOUT_HELP,
        "poll": POLL_HELP,
        "follow": FOLLOW_HELP,
        "json": JSON_HELP,
        "plain": PLAIN_HELP,
        "force-unlock": UNLOCK_HELP,
        "force": FORCE_HELP,
        "rolling": "one batch of workers at a time: each leaves its router, drains, restarts "
        "and rejoins once truly ready; never the last healthy worker; stops at the first "
        "failure",
        "batch": "with --rolling: workers restarted together (default 1)",
    }
)
def restart(
    c: Context,
    host: str | None = None,
    inventory: str | None = None,
    timeout: str | None = None,
    poll: str | None = None,
    follow: bool = False,
    json: bool = False,
    plain: bool = False,
    force_unlock: bool = False,
    force: bool = False,
    rolling: bool = False,
    batch: str | None = None,
) -> None:
    """Stop the running server and deploy it again (preflight, patches, start, wait)."""
    with reporting():
        knobs = _knobs(timeout, poll)
        selector = require_host("restart", host)
        if batch is not None and not rolling:
            raise UsageError("--batch goes with --rolling")
        size = whole("batch", batch, 1, minimum=1)
        how = DeployOptions(
            restart=True, force=force, force_unlock=force_unlock, action=Action.RESTART
        )
        inv = get_inventory(c, inventory)
        output = Output(follow, json, plain)
        if not rolling:
            run_fleet(c, inv, selector, output, _deploy_one(how, *knobs))
            return
        _roll(c, inv, selector, output, how, knobs, size)


def _serving_outside(
    c: Context, inv: Inventory, units: dict[str, list[str]]
) -> Callable[[list[str]], int]:
    """How many workers outside a batch serve now: the router's healthy workers when the
    deployment has one, else the other workers of the roll whose server is alive."""

    def count(batch: list[str]) -> int:
        first = units[batch[0]][0]
        spec = inv.host(first)
        deployment = inv.deployment_for(spec)
        if deployment.router is not None:
            with connected(c, inv, first) as node:
                handoff = handoff_of(node, spec, deployment)
                assert handoff is not None
                mine = {_url(inv, units[key][0]) for key in batch}
                return serving_beside(handoff.router(), mine)
        alive = 0
        for key, unit in units.items():
            if key in batch:
                continue
            with connected(c, inv, unit[0]) as node:
                run = current_run(node, inv.host(unit[0]))
                alive += int(run is not None and is_alive(node, run))
        return alive

    return count


def _url(inv: Inventory, name: str) -> str:
    spec = inv.host(name)
    return worker_url(spec, inv.deployment_for(spec))


def _roll(
    c: Context,
    inv: Inventory,
    selector: str,
    output: Output,
    how: DeployOptions,
    knobs: tuple[int, float],
    size: int,
) -> None:
    with Fleet(c, inv, selector, output, _deploy_one(how, *knobs)) as fleet:
        outcome = roll(
            list(fleet.units),
            size,
            serving_outside=_serving_outside(c, inv, fleet.units),
            restart=fleet.run,
            on_skip=lambda unit, why: fleet.board.message(unit, f"not restarted: {why}"),
        )
    _report(outcome, quiet=output.json)


def _report(outcome: RollOutcome, quiet: bool) -> None:
    rows = [
        [unit, step.value.upper(), (detail.splitlines() or [""])[0]]
        for unit, (step, detail) in outcome.steps.items()
    ]
    if not quiet:
        say(table(["HOST", "ROLL", "DETAIL"], rows))
    if outcome.ok:
        return
    for error in outcome.failures.values():  # the whole error: the failed check, the proof
        print(shown(f"firedup: {error}"), file=sys.stderr)
    first = next(iter(outcome.failures.values()), None)
    stopped = StartError(  # the first failure's exit code; 7 when no worker was tried
        f"rolling restart stopped: {outcome.stopped}",
        hint="the workers not restarted keep serving; `fab status` shows each",
    )
    if first is not None:
        stopped.exit_code = first.exit_code
    raise stopped
