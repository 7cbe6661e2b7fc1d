"""The deploy pipeline: plan (pure), then apply on one node, then verify by waiting.

`plan_deploy` computes everything that needs no node (run id, run directory, rendered script);
`apply_deploy` syncs the deployment's patches, starts it and waits. The dry run prints the
plan: not a separate code path.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from dataclasses import dataclass

from firedup.errors import PreflightError
from firedup.inventory import Deployment, HostSpec
from firedup.node import Node
from firedup.patching import sync_patches
from firedup.preflight import Outcome, PreflightReport, preflight
from firedup.readiness import NO_HOOKS, WaitHooks, WaitOptions, WaitStatus, wait_ready
from firedup.render import LaunchScript, check_bash_syntax, render_launch
from firedup.runs import RunMeta, current_run, new_run_id, start_run
from firedup.secrets import resolve_secrets


@dataclass(frozen=True)
class DeployPlan:
    host: HostSpec
    deployment: Deployment
    run_id: str
    script: LaunchScript

    @property
    def rundir(self) -> str:
        return posixpath.join(self.host.workdir, "runs", self.run_id)


def plan_deploy(host: HostSpec, deployment: Deployment, run_id: str | None = None) -> DeployPlan:
    run_id = run_id or new_run_id()
    rundir = posixpath.join(host.workdir, "runs", run_id)
    script = render_launch(host, deployment, run_id=run_id, rundir=rundir)
    check_bash_syntax(script)
    return DeployPlan(host=host, deployment=deployment, run_id=run_id, script=script)


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
    on_progress: Callable[[str], None] = lambda _m: None,
) -> RunMeta:
    return start_run(
        node,
        plan.host,
        plan.deployment,
        plan.script,
        plan.run_id,
        restart=restart,
        secrets=resolve_secrets(plan.deployment),
        on_progress=on_progress,
    )


def check_preflight(
    node: Node, plan: DeployPlan, *, restart: bool, current: RunMeta | None
) -> PreflightReport:
    """Preflight for a deploy: raise PreflightError (nothing launched) when a check fails."""
    report = preflight(node, plan.host, plan.deployment, current=current, restart=restart)
    if not report.ok:
        raise PreflightError(
            f"{plan.host.name}: preflight failed; nothing was launched\n{report.text()}",
            hint=f"fix the failed checks; `fab preflight --host {plan.host.name}` re-checks",
        )
    return report


def apply_deploy(
    node: Node,
    plan: DeployPlan,
    options: WaitOptions,
    hooks: WaitHooks = NO_HOOKS,
    *,
    restart: bool = False,
    on_progress: Callable[[str], None] = lambda _m: None,
    on_started: Callable[[RunMeta], None] = lambda _r: None,
) -> WaitStatus:
    """preflight -> sync patches -> start -> wait: the whole deploy on one node."""
    report = check_preflight(node, plan, restart=restart, current=current_run(node, plan.host))
    for check in report.checks:
        if check.outcome is not Outcome.PASS:
            on_progress(f"preflight {check.outcome.value}: {check.name}: {check.detail}")
    on_progress(f"preflight passed ({len(report.checks)} checks)")
    if plan.deployment.patches:
        patched = sync_patches(node, plan.host, plan.deployment, on_progress=on_progress)
        for line in patched.lines():
            on_progress(f"patch {line}")
    run = start_plan(node, plan, restart=restart, on_progress=on_progress)
    on_started(run)
    return wait_ready(node, run, options, hooks)
