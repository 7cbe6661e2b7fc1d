"""Tasks that bring a server up: deploy, render, start, wait."""

from __future__ import annotations

from collections.abc import Callable

from fabric import task
from invoke.context import Context

from firedup.deploy import apply_deploy, plan_deploy, start_plan
from firedup.errors import StartError
from firedup.readiness import WaitStatus, wait_ready
from firedup.report import progress_key, progress_text
from firedup.runs import current_run, run_by_id
from tasks.common import (
    HOST_HELP,
    INVENTORY_HELP,
    connect,
    get_inventory,
    progress,
    reporting,
    require_host,
    say,
)

TIMEOUT_HELP = "seconds to wait for ready (default: the deployment's ready_timeout_s, 1800)"
POLL_HELP = "seconds between probes (default 1)"


def _status_printer(host: str) -> Callable[[WaitStatus], None]:
    report = progress(host)
    seen: list[object] = []

    def on_status(status: WaitStatus) -> None:
        key = progress_key(status)
        if not seen or seen[-1] != key:
            seen[:] = [key]
            report(progress_text(status))

    return on_status


def _ready_message(status: WaitStatus) -> str:
    run = status.run
    return (
        f"{run.host}: READY  run {run.run_id}, {run.engine.value} on port {run.port}, "
        f"pid {run.pid}, after {status.elapsed_s:.0f}s"
    )


@task(
    help={
        "host": HOST_HELP,
        "inventory": INVENTORY_HELP,
        "restart": "stop our running server first instead of refusing",
        "timeout": TIMEOUT_HELP,
        "poll": POLL_HELP,
    }
)
def deploy(
    c: Context,
    host: str | None = None,
    inventory: str | None = None,
    restart: bool = False,
    timeout: int = 0,
    poll: float = 1.0,
) -> None:
    """Render, start and wait until the server is truly ready."""
    with reporting():
        name = require_host("deploy", host)
        inv = get_inventory(c, inventory)
        spec = inv.host(name)
        plan = plan_deploy(spec, inv.deployment_for(spec))
        node = connect(c, inv, name)
        try:
            status = apply_deploy(
                node,
                plan,
                restart=restart,
                timeout_s=float(timeout) or None,
                poll_s=float(poll),
                on_progress=progress(name),
                on_status=_status_printer(name),
            )
        finally:
            node.close()
        say(_ready_message(status))


@task(help={"host": HOST_HELP, "inventory": INVENTORY_HELP})
def render(c: Context, host: str | None = None, inventory: str | None = None) -> None:
    """Print the launch script a deploy would run (nothing is contacted)."""
    with reporting():
        name = require_host("render", host)
        inv = get_inventory(c, inventory)
        spec = inv.host(name)
        print(plan_deploy(spec, inv.deployment_for(spec), run_id="RUN-ID").script.text, end="")


@task(
    help={
        "host": HOST_HELP,
        "inventory": INVENTORY_HELP,
        "restart": "stop our running server first",
    }
)
def start(
    c: Context, host: str | None = None, inventory: str | None = None, restart: bool = False
) -> None:
    """Start the server detached and return at once (see `wait`)."""
    with reporting():
        name = require_host("start", host)
        inv = get_inventory(c, inventory)
        spec = inv.host(name)
        plan = plan_deploy(spec, inv.deployment_for(spec))
        node = connect(c, inv, name)
        try:
            run = start_plan(node, plan, restart=restart, on_progress=progress(name))
        finally:
            node.close()
        say(f"{name}: started run {run.run_id}, pid {run.pid}; log {run.log_path}")


@task(
    help={
        "host": HOST_HELP,
        "inventory": INVENTORY_HELP,
        "timeout": TIMEOUT_HELP,
        "poll": POLL_HELP,
        "run": "run id to wait for (default: the current run)",
    }
)
def wait(
    c: Context,
    host: str | None = None,
    inventory: str | None = None,
    timeout: int = 0,
    poll: float = 1.0,
    run: str | None = None,
) -> None:
    """Wait until the current run is ready (re-attaches from any machine)."""
    with reporting():
        name = require_host("wait", host)
        inv = get_inventory(c, inventory)
        spec = inv.host(name)
        node = connect(c, inv, name)
        try:
            meta = run_by_id(node, spec, run) if run else current_run(node, spec)
            if meta is None:
                raise StartError(f"{name}: nothing was started here yet", hint="`fab deploy` it")
            status = wait_ready(
                node,
                meta,
                timeout_s=float(timeout) or inv.deployment_for(spec).ready_timeout_s,
                poll_s=float(poll),
                on_status=_status_printer(name),
            )
        finally:
            node.close()
        say(_ready_message(status))
