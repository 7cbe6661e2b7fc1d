"""The lock's one task: `fab unlock`, for a lock whose operation is known to be dead."""

from __future__ import annotations

from fabric import task
from invoke.context import Context

from firedup.node.lock import force_unlock
from tasks.common import (
    HOST_HELP,
    INVENTORY_HELP,
    connected,
    get_inventory,
    reporting,
    require_host,
    say,
)


@task(help={"host": HOST_HELP, "inventory": INVENTORY_HELP})
def unlock(c: Context, host: str | None = None, inventory: str | None = None) -> None:
    """Force-unlock a node: end the recorded lock holder (only a firedup one), clear its record."""
    with reporting():
        name = require_host("unlock", host)
        inv = get_inventory(c, inventory)
        with connected(c, inv, name) as node:
            report = force_unlock(node, inv.host(name))
        if report.previous is None:
            say(f"{name}: not locked")
            return
        was = f"{report.previous.state.value}: {report.previous.describe()}"
        ended = "holder ended" if report.state == "released" else f"holder {report.state}"
        say(f"{name}: unlocked ({ended}); it was {was}")
