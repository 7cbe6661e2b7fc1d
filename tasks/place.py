"""`fab place`: which hosts and GPUs could take a deployment right now (changes nothing)."""

from __future__ import annotations

from json import dumps

from fabric import task
from invoke.context import Context

from firedup.errors import PreflightError, UsageError
from firedup.ops.place import Fit, place_on
from firedup.readiness.report import table

from .common import INVENTORY_HELP, connected, exit_by_rule, get_inventory, per_host, reporting, say


@task(
    help={
        "deployment": "the deployment to place (a name under deployments:)",
        "host": "a host, a group, or a comma list of either (default: every host)",
        "inventory": INVENTORY_HELP,
        "json": "one JSON object: {format, deployment, hosts: [{host, fits, gpus, why, failures}]}",
    }
)
def place(
    c: Context,
    deployment: str | None = None,
    host: str | None = None,
    inventory: str | None = None,
    json: bool = False,
) -> None:
    """Which hosts and GPUs could take a deployment right now, and why the others cannot."""
    with reporting():
        if not deployment:
            raise UsageError("place: --deployment NAME is required")
        inv = get_inventory(c, inventory)
        if deployment not in inv.deployments:
            raise UsageError(
                f"place: unknown deployment {deployment!r}; known: "
                f"{', '.join(sorted(inv.deployments))}"
            )
        wanted = inv.deployments[deployment]
        names = [h.name for h in inv.select(host)]

        def judge(name: str) -> Fit:
            with connected(c, inv, name) as node:
                return place_on(node, inv.host(name), wanted)

        results = per_host(names, judge)
        fits = {n: r for n, r in results.items() if isinstance(r, Fit)}
        if json:
            hosts = [f.to_json() for f in fits.values()]
            say(dumps({"format": 1, "deployment": deployment, "hosts": hosts}))
        else:
            say(table(["HOST", "FITS", "GPUS", "WHY"], [f.row() for f in fits.values()]))
        exit_by_rule(results)
        if not any(f.fits for f in fits.values()):
            raise PreflightError(f"no host of {host or 'the inventory'} can take {deployment} now")
