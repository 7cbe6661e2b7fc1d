"""Tasks that bring servers up: deploy, restart, render, start, wait.

`--host` takes a host, a group, or a comma list: hosts run in parallel (one connection each),
each with its own progress line, then one summary table; any failure makes the exit code
non-zero and never hides another host's outcome.
"""

from __future__ import annotations

import sys

from invoke.context import Context

from firedup.config.inventory import Inventory
from firedup.errors import (
    StartError,
)
from firedup.launch.runs import RunMeta, current_run, run_by_id
from firedup.ops.apply import deploy_ranks
from firedup.ops.deploy import (
    DeployOptions,
    plan_deploy,
    start_recorded,
    wait_options,
)
from firedup.ops.multinode import Rank, wait_recorded
from firedup.readiness.wait import WaitHooks
from firedup.readiness.watch import WaitStatus

from .common import (
    INVENTORY_HELP,
    MAX_PARALLEL_HELP,
    connect,
    connected,
    get_inventory,
    number,
    reporting,
    require_host,
    say,
    task,
    whole,
)
from .fleet import Launches, Work, run_fleet
from .plan import show_plan
from .progress import HostView, Output
from .shown import shown

HOSTS_HELP = "host, group or comma list (see inventory/hosts.yaml)"
TIMEOUT_HELP = "seconds to wait for ready (default: the deployment's ready_timeout_s, 1800)"
POLL_HELP = "seconds between looks at process, port and health (the log streams; default 1)"
FOLLOW_HELP = "print the server log as it arrives"
JSON_HELP = "one JSON object per event on stdout (docs/events.md); nothing else there"
PLAIN_HELP = "plain lines, one per change, even on a terminal (no live display)"
UNLOCK_HELP = "take the node's lock even if another operation holds it (ends its holder)"


def _hooks(view: HostView) -> WaitHooks:
    # The raw log crosses the link only when asked for (--follow): the wait reads it on the
    # node (firedup.readiness.nodeside) and gets states, not bytes.
    if view.board.follow:
        return WaitHooks(
            on_status=view.status, on_scan=view.scan, on_log=view.log, on_reconnect=view.reconnect
        )
    return WaitHooks(on_status=view.status, on_scan=view.scan, on_reconnect=view.reconnect)


def _ranks(c: Context, inv: Inventory, unit: list[str], run_id: str | None = None) -> list[Rank]:
    ranks = []
    for rank, name in enumerate(unit):
        spec = inv.host(name)
        plan = plan_deploy(spec, inv.deployment_for(spec), run_id, inv.placement(spec))
        ranks.append(Rank(rank, connect(c, inv, name), plan))
    return ranks


def _close(ranks: list[Rank]) -> None:
    for rank in ranks:
        rank.node.close()


MIN_POLL_S = 0.1  # --poll 0 would look at the node in a busy loop


def _knobs(timeout: str | None, poll: str | None) -> tuple[int, float]:
    """--timeout and --poll, checked before anything is contacted."""
    return whole("timeout", timeout, 0), number("poll", poll, 1.0, minimum=MIN_POLL_S)


def _started(view: HostView, started: dict[str, RunMeta], run: RunMeta) -> None:
    if run.host == view.host.split(",")[0]:  # a multi-node unit is one wait, told by rank 0
        view.started(run)
    started[run.host] = run


def _deploy_one(options: DeployOptions, timeout: int, poll: float) -> Work:
    def work(
        c: Context, inv: Inventory, unit: list[str], view: HostView, started: Launches
    ) -> WaitStatus:
        deployment = inv.deployment_for(inv.host(unit[0]))
        wait = wait_options(deployment, float(timeout), float(poll))
        ranks = _ranks(c, inv, unit)
        # One path for one node or several; several name the host in each message.
        several = len(ranks) > 1
        try:
            return deploy_ranks(
                ranks,
                wait,
                _hooks(view),
                how=options,
                on_progress=lambda host, m: view.message(f"{host}: {m}" if several else m),
                on_started=lambda run: _started(view, started, run),
                on_launching=started.launching.add,
            )
        finally:
            _close(ranks)

    return work


FORCE_HELP = (
    "with --restart: replace the live run even when another host entry sharing this node and "
    "workdir started it"
)


@task(
    help={
        "host": HOSTS_HELP,
        "inventory": INVENTORY_HELP,
        "restart": "stop our running server first instead of refusing",
        "timeout": TIMEOUT_HELP,
        "poll": POLL_HELP,
        "follow": FOLLOW_HELP,
        "json": JSON_HELP,
        "plain": PLAIN_HELP,
        "dry-run": "print the plan (preflight, patch diffs, script, actions); change nothing",
        "force-unlock": UNLOCK_HELP,
        "force": FORCE_HELP,
        "max-parallel": MAX_PARALLEL_HELP,
    }
)
def deploy(
    c: Context,
    host: str | None = None,
    inventory: str | None = None,
    restart: bool = False,
    timeout: str | None = None,
    poll: str | None = None,
    follow: bool = False,
    json: bool = False,
    plain: bool = False,
    dry_run: bool = False,
    force_unlock: bool = False,
    force: bool = False,
    max_parallel: int = 0,
) -> None:
    """Preflight, sync patches, render, start, and wait until the server is truly ready."""
    with reporting():
        knobs = _knobs(timeout, poll)
        selector = require_host("deploy", host)
        if dry_run:
            show_plan(c, selector, inventory, restart)
            return
        how = DeployOptions(restart=restart, force=force, force_unlock=force_unlock)
        run_fleet(
            c,
            get_inventory(c, inventory),
            selector,
            Output(follow, json, plain),
            _deploy_one(how, *knobs),
            max_parallel,
        )


@task(
    help={
        "host": HOSTS_HELP,
        "inventory": INVENTORY_HELP,
        "engine-version": "render for this engine release (default: the deployment's "
        "engine_version, else the newest release firedup checked)",
    }
)
def render(
    c: Context,
    host: str | None = None,
    inventory: str | None = None,
    engine_version: str | None = None,
) -> None:
    """Print the launch script a deploy would run (nothing is contacted).

    Rendered for --engine-version, else the deployment's `engine_version`, else the newest
    release firedup checked; a deploy renders for the release installed on the node."""
    with reporting():
        inv = get_inventory(c, inventory)
        specs = inv.select(require_host("render", host))
        for spec in specs:
            deployment = inv.deployment_for(spec)
            plan = plan_deploy(
                spec,
                deployment,
                run_id="RUN-ID",
                placement=inv.placement(spec),
                engine_version=engine_version,
            )
            assumed = "" if engine_version else " (assumed; --engine-version to choose)"
            # stderr: stdout stays the script alone, for `fab render > launch.sh`
            what = f"{deployment.engine.value} {plan.script.release}{assumed}"
            print(shown(f"{spec.name}: rendered for {what}"), file=sys.stderr)
            print(plan.script.text, end="")
            if plan.script.inner:  # in a container: the engine's script, run inside it
                print(shown(f"\n# --- engine.sh ({plan.rundir}/engine.sh), run inside it ---"))
                print(plan.script.inner, end="")


@task(
    help={
        "host": HOSTS_HELP,
        "inventory": INVENTORY_HELP,
        "restart": "stop ours first",
        "force": FORCE_HELP,
    }
)
def start(
    c: Context,
    host: str | None = None,
    inventory: str | None = None,
    restart: bool = False,
    force: bool = False,
) -> None:
    """Start detached and return at once: no preflight, no wait (a runbook step)."""
    with reporting():
        inv = get_inventory(c, inventory)
        for spec in inv.select(require_host("start", host)):
            plan = plan_deploy(spec, inv.deployment_for(spec), placement=inv.placement(spec))
            with connected(c, inv, spec.name) as node:
                run = start_recorded(node, plan, restart=restart, force=force)
            say(f"{spec.name}: started run {run.run_id}, pid {run.pid}; log {run.log_path}")


def _wait_one(timeout: int, poll: float, run_id: str | None) -> Work:
    def work(
        c: Context, inv: Inventory, unit: list[str], view: HostView, started: Launches
    ) -> WaitStatus:
        deployment = inv.deployment_for(inv.host(unit[0]))
        options = wait_options(deployment, float(timeout), float(poll))
        ranks = _ranks(c, inv, unit)
        try:
            runs: list[RunMeta] = []
            for rank in ranks:
                spec = rank.plan.host
                meta = (
                    run_by_id(rank.node, spec, run_id) if run_id else current_run(rank.node, spec)
                )
                if meta is None:
                    raise StartError(
                        f"{spec.name}: nothing was started here yet", hint="`fab deploy` it"
                    )
                if not runs:
                    view.started(meta)
                started[spec.name] = meta
                runs.append(meta)
            # One rank or several: with one, there is no other rank to watch.
            return wait_recorded(ranks, runs, options, _hooks(view), view.message)
        finally:
            _close(ranks)

    return work


@task(
    help={
        "host": HOSTS_HELP,
        "inventory": INVENTORY_HELP,
        "timeout": TIMEOUT_HELP,
        "poll": POLL_HELP,
        "run": "run id to wait for (default: the current run)",
        "follow": FOLLOW_HELP,
        "json": JSON_HELP,
        "plain": PLAIN_HELP,
    }
)
def wait(
    c: Context,
    host: str | None = None,
    inventory: str | None = None,
    timeout: str | None = None,
    poll: str | None = None,
    run: str | None = None,
    follow: bool = False,
    json: bool = False,
    plain: bool = False,
) -> None:
    """Wait until the current run is ready (re-attaches from any machine)."""
    with reporting():
        selector = require_host("wait", host)
        knobs = _knobs(timeout, poll)
        output = Output(follow, json, plain)
        run_fleet(c, get_inventory(c, inventory), selector, output, _wait_one(*knobs, run))
