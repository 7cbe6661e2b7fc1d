"""Tasks that bring a server up: deploy, render, start, wait."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from fabric import task
from invoke.context import Context

from firedup.deploy import apply_deploy, plan_deploy, start_plan, wait_options
from firedup.errors import StartError, WaitInterrupted
from firedup.readiness import WaitHooks, WaitStatus, wait_ready
from firedup.runs import RunMeta, current_run, run_by_id
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
from tasks.plan import show_plan
from tasks.progress import WaitDisplay

TIMEOUT_HELP = "seconds to wait for ready (default: the deployment's ready_timeout_s, 1800)"
POLL_HELP = "seconds between looks at process, port and health (the log streams; default 1)"
FOLLOW_HELP = "print the server log as it arrives"


@contextmanager
def interruptible(display: WaitDisplay, run: list[RunMeta]) -> Iterator[None]:
    """Ctrl-C stops waiting, never the server: say so and how to come back."""
    try:
        yield
    except KeyboardInterrupt:
        display.end_line()
        if not run:
            raise
        host = run[0].host
        raise WaitInterrupted(
            f"{host}: interrupted; the server keeps running (run {run[0].run_id}, "
            f"pid {run[0].pid})",
            hint=f"re-attach with `fab wait --host {host}`; stop it with `fab stop --host {host}`",
        ) from None


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
        "follow": FOLLOW_HELP,
        "dry-run": "print the plan (preflight, patch diffs, script, actions); change nothing",
    }
)
def deploy(
    c: Context,
    host: str | None = None,
    inventory: str | None = None,
    restart: bool = False,
    timeout: int = 0,
    poll: float = 1.0,
    follow: bool = False,
    dry_run: bool = False,
) -> None:
    """Preflight, sync patches, render, start, and wait until the server is truly ready."""
    with reporting():
        if dry_run:
            show_plan(c, host, inventory, restart)
            return
        name = require_host("deploy", host)
        inv = get_inventory(c, inventory)
        spec = inv.host(name)
        deployment = inv.deployment_for(spec)
        plan = plan_deploy(spec, deployment)
        display = WaitDisplay(name, follow=follow)
        started: list[RunMeta] = []
        node = connect(c, inv, name)
        try:
            with interruptible(display, started):
                status = apply_deploy(
                    node,
                    plan,
                    wait_options(deployment, float(timeout), float(poll)),
                    _hooks(display),
                    restart=restart,
                    on_progress=display.message,
                    on_started=started.append,
                )
        finally:
            display.end_line()
            node.close()
        say(_ready_message(status))


def _hooks(display: WaitDisplay) -> WaitHooks:
    return WaitHooks(on_status=display.status, on_log=display.log, on_reconnect=display.message)


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
        "follow": FOLLOW_HELP,
    }
)
def wait(
    c: Context,
    host: str | None = None,
    inventory: str | None = None,
    timeout: int = 0,
    poll: float = 1.0,
    run: str | None = None,
    follow: bool = False,
) -> None:
    """Wait until the current run is ready (re-attaches from any machine)."""
    with reporting():
        name = require_host("wait", host)
        inv = get_inventory(c, inventory)
        spec = inv.host(name)
        display = WaitDisplay(name, follow=follow)
        node = connect(c, inv, name)
        try:
            meta = run_by_id(node, spec, run) if run else current_run(node, spec)
            if meta is None:
                raise StartError(f"{name}: nothing was started here yet", hint="`fab deploy` it")
            options = wait_options(inv.deployment_for(spec), float(timeout), float(poll))
            with interruptible(display, [meta]):
                status = wait_ready(node, meta, options, _hooks(display))
        finally:
            display.end_line()
            node.close()
        say(_ready_message(status))
