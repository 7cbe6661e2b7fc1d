"""`fab pull`: the deployment's image pulled on a host, with the runtime's progress."""

from __future__ import annotations

from fabric import task
from invoke.context import Context

from firedup.ops.containers import pull_image

from .common import (
    HOST_HELP,
    INVENTORY_HELP,
    connected,
    get_inventory,
    progress,
    reporting,
    require_host,
    say,
)


@task(help={"host": HOST_HELP, "inventory": INVENTORY_HELP})
def pull(c: Context, host: str | None = None, inventory: str | None = None) -> None:
    """Pull the deployment's image on a host (runtime: podman or docker; docs/containers.md)."""
    with reporting():
        name = require_host("pull", host)
        inv = get_inventory(c, inventory)
        spec = inv.host(name)
        with connected(c, inv, name) as node:
            image_id = pull_image(node, spec, inv.deployment_for(spec), progress(name))
        say(f"{name}: {image_id}")
