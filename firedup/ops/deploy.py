"""The deploy pipeline's steps on one node: plan (pure), prepare, start, record, prune.

`plan_deploy` computes everything that needs no node (run id, run directory, rendered script);
`prepare` runs preflight and syncs patches; `start_plan` starts; `record` and `prune` keep the
node's history and run directories. The one path that runs them in order under the node's
lock, for one node or several, is firedup.ops.apply. The dry run prints the plan: not a
separate code path.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from dataclasses import dataclass

from firedup.config.inventory import Deployment, HostSpec, Placement
from firedup.config.secrets import resolve_secrets
from firedup.errors import (
    DeployError,
    PreflightError,
    ServerCrashedError,
    StartError,
)
from firedup.launch.render import LaunchScript, check_bash_syntax, launch_env, render_launch
from firedup.launch.runs import (
    RunMeta,
    current_run,
    is_alive,
    new_run_id,
    refuse_another_hosts_run,
    start_run,
)
from firedup.logscan import ScanState
from firedup.node.base import Node
from firedup.node.lock import lock_status, node_lock
from firedup.ops.containers import apply_patches, launch_image
from firedup.ops.handoff import leave_before_restart
from firedup.ops.history import (
    Action,
    Outcome,
    append_history,
    prune_runs,
    read_history,
    run_record,
    stop_of,
)
from firedup.ops.repo import inventory_commit
from firedup.preflight import Outcome as CheckOutcome
from firedup.preflight import PreflightReport, preflight
from firedup.readiness.wait import WaitOptions

Progress = Callable[[str], None]


def _quiet(_message: str) -> None:
    return None


@dataclass(frozen=True)
class DeployPlan:
    host: HostSpec
    deployment: Deployment
    run_id: str
    script: LaunchScript
    placement: Placement | None = None

    @property
    def rundir(self) -> str:
        return posixpath.join(self.host.workdir, "runs", self.run_id)


def plan_deploy(
    host: HostSpec,
    deployment: Deployment,
    run_id: str | None = None,
    placement: Placement | None = None,
    engine_version: str | None = None,
) -> DeployPlan:
    """Without `engine_version` the script is for the deployment's assumed release; a deploy
    re-renders it for the release preflight finds on the node (`for_release`)."""
    run_id = run_id or new_run_id()
    rundir = posixpath.join(host.workdir, "runs", run_id)
    script = render_launch(
        host,
        deployment,
        run_id=run_id,
        rundir=rundir,
        placement=placement,
        engine_version=engine_version,
        image=launch_image(host, deployment),
    )
    check_bash_syntax(script)
    return DeployPlan(host, deployment, run_id, script, placement)


def for_release(plan: DeployPlan, engine_version: str | None) -> DeployPlan:
    """The plan rendered for the engine release installed on the node (as preflight read it)."""
    if not engine_version or (engine_version == plan.script.release and not plan.script.assumed):
        return plan
    return plan_deploy(plan.host, plan.deployment, plan.run_id, plan.placement, engine_version)


def wait_options(deployment: Deployment, timeout_s: float | None, tick_s: float) -> WaitOptions:
    """CLI value > deployment value > default, for the wait's knobs."""
    return WaitOptions(
        timeout_s=timeout_s or deployment.ready_timeout_s,
        tick_s=tick_s,
        phase_budgets_s=deployment.phase_budgets_s,
    )


def start_plan(
    node: Node,
    plan: DeployPlan,
    *,
    restart: bool = False,
    force: bool = False,
    engine_version: str | None = None,
    on_progress: Progress = _quiet,
) -> RunMeta:
    plan = for_release(plan, engine_version)
    return start_run(
        node,
        plan.host,
        plan.deployment,
        plan.script,
        plan.run_id,
        restart=restart,
        force=force,
        secrets=resolve_secrets(plan.deployment),
        engine_version=engine_version,
        on_progress=on_progress,
    )


def start_recorded(
    node: Node,
    plan: DeployPlan,
    *,
    restart: bool = False,
    force: bool = False,
    force_unlock: bool = False,
    on_progress: Progress = _quiet,
) -> RunMeta:
    """`fab start`: launch under the node's lock, without preflight or wait; record it."""
    with node_lock(
        node, plan.host, "start", force=force_unlock, detail=plan.run_id, on_progress=on_progress
    ):
        if restart:
            leave_before_restart(node, plan.host, plan.deployment, on_progress)
        run = start_plan(node, plan, restart=restart, force=force, on_progress=on_progress)
        record(node, plan, run, Action.START, (Outcome.STARTED, ""), on_progress=on_progress)
        return run


def check_preflight(
    node: Node, plan: DeployPlan, *, restart: bool, current: RunMeta | None
) -> PreflightReport:
    """Preflight for a deploy: raise PreflightError (nothing launched) when a check fails."""
    report = preflight(
        node, plan.host, plan.deployment, current=current, restart=restart, placement=plan.placement
    )
    if not report.ok:
        raise PreflightError(
            f"{plan.host.name}: preflight failed; nothing was launched\n{report.text()}",
            hint=f"fix the failed checks; `fab preflight --host {plan.host.name}` re-checks",
        )
    return report


def record(
    node: Node,
    plan: DeployPlan,
    run: RunMeta,
    action: Action,
    outcome: tuple[Outcome, str],
    *,
    scan: ScanState | None = None,
    on_progress: Progress = _quiet,
) -> None:
    """Append to the node's history; a failure to record never hides the deploy's outcome."""
    entry = run_record(
        action,
        outcome[0],
        run,
        reason=outcome[1],
        scan=scan,
        env=launch_env(plan.host, plan.deployment),
        secret_keys=plan.deployment.secrets,
        patches=plan.deployment.patches,
        engine_version=run.engine_version or "",
        commit=inventory_commit(plan.host),
    )
    try:
        append_history(node, plan.host, entry)
    except DeployError as exc:
        on_progress(f"warning: could not append to the node's history: {exc}")


@dataclass(frozen=True)
class DeployOptions:
    restart: bool = False
    force: bool = False  # replace a live run that another host entry of the slot started
    force_unlock: bool = False
    action: Action = Action.DEPLOY


def stopped_during_wait(
    node: Node, plan: DeployPlan, run: RunMeta, exc: BaseException
) -> DeployError | None:
    """The server "exited" because `fab stop` (another terminal) ended it: say that instead.
    The stop's history record comes after the server is gone; until then the stop is known
    by the lock it took over from this deploy."""
    if not isinstance(exc, ServerCrashedError):
        return None
    try:
        # The lock first, the history second: a stop writes its history line before it lets
        # the lock go, so one of the two shows it (the other order can miss both when the stop
        # ends in between).
        info = lock_status(node, plan.host)
        stop = stop_of(read_history(node, plan.host, 50), run.run_id)
    except DeployError:
        return None
    if stop is not None:
        who = f"{stop.who} at {stop.at:%Y-%m-%d %H:%M:%S} UTC"
    elif info is not None and info.owner is not None and info.owner.operation == "stop":
        who = info.owner.operator
    else:
        return None
    return DeployError(
        f"{plan.host.name}: run {run.run_id} was stopped by {who} (`fab stop`) while this "
        "wait was on",
        hint=f"`fab deploy --host {plan.host.name}` starts it again",
    )


def prepare(
    node: Node, plan: DeployPlan, how: DeployOptions, on_progress: Progress
) -> PreflightReport:
    """preflight -> sync patches, under the caller's lock; raises when the launch would fail."""
    current = current_run(node, plan.host)
    alive = current is not None and is_alive(node, current)
    if alive and how.restart:
        refuse_another_hosts_run(plan.host, current, force=how.force)
    if current is not None and not how.restart and alive:
        # Said before preflight, whose port check would call it a preflight failure (6):
        # a server of ours already running is a refused start (7), as docs/exit-codes.md says.
        raise StartError(
            f"{plan.host.name}: run {current.run_id} is still running (pid {current.pid})",
            hint="use --restart to replace it, or `fab stop` it first",
        )
    report = check_preflight(node, plan, restart=how.restart, current=current)
    for check in report.checks:
        if check.outcome is not CheckOutcome.PASS:
            on_progress(f"preflight {check.outcome.value}: {check.name}: {check.detail}")
    on_progress(f"preflight passed ({len(report.checks)} checks)")
    if plan.deployment.patches:
        patched = apply_patches(node, plan.host, plan.deployment, on_progress)
        for line in patched.lines():
            on_progress(f"patch {line}")
    return report


def prune(node: Node, host: HostSpec, on_progress: Progress) -> None:
    """Old runs past `keep_runs` go; the current and the last failed one always stay."""
    try:
        pruned = prune_runs(node, host, host.keep_runs)
    except DeployError as exc:
        on_progress(f"warning: could not prune old runs: {exc}")
        return
    if pruned.removed:
        on_progress(f"pruned {len(pruned.removed)} old run(s): {', '.join(pruned.removed)}")
