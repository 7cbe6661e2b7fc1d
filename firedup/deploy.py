"""The deploy pipeline: plan (pure), then apply on one node, then verify by waiting.

`plan_deploy` computes everything that needs no node (run id, run directory, rendered script);
`apply_deploy` starts it and waits. The dry run prints the plan: not a separate code path.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from dataclasses import dataclass

from firedup.inventory import Deployment, HostSpec
from firedup.node import Node
from firedup.readiness import WaitStatus, wait_ready
from firedup.render import LaunchScript, check_bash_syntax, render_launch
from firedup.runs import RunMeta, new_run_id, start_run


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
        on_progress=on_progress,
    )


def apply_deploy(
    node: Node,
    plan: DeployPlan,
    *,
    restart: bool = False,
    timeout_s: float | None = None,
    poll_s: float = 1.0,
    on_progress: Callable[[str], None] = lambda _m: None,
    on_status: Callable[[WaitStatus], None] = lambda _s: None,
) -> WaitStatus:
    run = start_plan(node, plan, restart=restart, on_progress=on_progress)
    return wait_ready(
        node,
        run,
        timeout_s=timeout_s or plan.deployment.ready_timeout_s,
        poll_s=poll_s,
        on_status=on_status,
    )
