"""Tasks that look before they leap: preflight and plan (the dry run)."""

from __future__ import annotations

from fabric import task
from invoke.context import Context

from firedup.errors import PreflightError
from firedup.launch.runs import current_run
from firedup.ops.deploy import plan_deploy
from firedup.ops.plan import make_plan, plan_text
from firedup.preflight import preflight as run_preflight
from tasks.common import (
    HOST_HELP,
    INVENTORY_HELP,
    connected,
    get_inventory,
    reporting,
    require_host,
    say,
)

RESTART_HELP = "judge the port as a deploy --restart would (our running server gets replaced)"


@task(help={"host": HOST_HELP, "inventory": INVENTORY_HELP, "restart": RESTART_HELP})
def preflight(
    c: Context, host: str | None = None, inventory: str | None = None, restart: bool = False
) -> None:
    """Check the node for every launch failure that can be predicted (changes nothing)."""
    with reporting():
        name = require_host("preflight", host)
        inv = get_inventory(c, inventory)
        spec = inv.host(name)
        with connected(c, inv, name) as node:
            report = run_preflight(
                node,
                spec,
                inv.deployment_for(spec),
                current=current_run(node, spec),
                restart=restart,
                placement=inv.placement(spec),
            )
        say(report.text())
        if not report.ok:
            raise PreflightError(f"{name}: {len(report.failures)} preflight check(s) failed")


def show_plan(c: Context, host: str | None, inventory: str | None, restart: bool) -> None:
    """The dry run, shared by `fab plan` and `fab deploy --dry-run`."""
    name = require_host("plan", host)
    inv = get_inventory(c, inventory)
    spec = inv.host(name)
    plan = plan_deploy(spec, inv.deployment_for(spec), placement=inv.placement(spec))
    with connected(c, inv, name) as node:
        report = make_plan(node, plan, restart=restart)
    say(plan_text(report))
    if not report.preflight.ok:
        raise PreflightError(f"{name}: a deploy would stop at preflight")


@task(help={"host": HOST_HELP, "inventory": INVENTORY_HELP, "restart": RESTART_HELP})
def plan(
    c: Context, host: str | None = None, inventory: str | None = None, restart: bool = False
) -> None:
    """What a deploy would do: preflight, patch diffs, script, node actions (changes nothing)."""
    with reporting():
        show_plan(c, host, inventory, restart)
