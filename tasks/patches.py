"""`fab sync-patches`: check, apply or revert the deployment's patches on one host."""

from __future__ import annotations

from fabric import task
from invoke.context import Context

from firedup.errors import PatchError, UsageError
from firedup.ops.patches import sync_patches_recorded
from firedup.patching import Mode
from tasks.common import (
    HOST_HELP,
    INVENTORY_HELP,
    connected,
    get_inventory,
    progress,
    reporting,
    require_host,
    say,
)


@task(
    name="sync-patches",
    help={
        "host": HOST_HELP,
        "check": "only report each patch's state; change nothing (exit 5 on conflicts)",
        "revert": "restore the byte-identical originals of every patch recorded on the node",
        "inventory": INVENTORY_HELP,
        "force-unlock": "take the node's lock even if another operation holds it",
    },
)
def sync_patches(
    c: Context,
    host: str | None = None,
    check: bool = False,
    revert: bool = False,
    inventory: str | None = None,
    force_unlock: bool = False,
) -> None:
    """Sync the deployment's patches into the installed package on a host (all or nothing)."""
    with reporting():
        name = require_host("sync-patches", host)
        if check and revert:
            raise UsageError("sync-patches: --check and --revert exclude each other")
        mode = Mode.CHECK if check else Mode.REVERT if revert else Mode.APPLY
        inv = get_inventory(c, inventory)
        spec = inv.host(name)
        with connected(c, inv, name) as node:
            report = sync_patches_recorded(
                node,
                spec,
                inv.deployment_for(spec),
                mode=mode,
                force_unlock=force_unlock,
                on_progress=progress(name),
            )
        for line in report.lines():
            say(f"{name}: {line}")
        if report.conflicts:
            raise PatchError(f"{len(report.conflicts)} patch(es) conflict on {name}")
