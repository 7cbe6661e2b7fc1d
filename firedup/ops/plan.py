"""The dry run: what a deploy would do, computed by the same steps and only reading the node.

`fab deploy --dry-run` and `fab plan` print this: the preflight table, the patch plan with its
diffs, the rendered launch script, and the actions a deploy would take on the node.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

from firedup.config.secrets import MASK, mask
from firedup.errors import RenderError
from firedup.launch.runs import STOP_GRACE_S, RunMeta, current_run, is_alive
from firedup.node.base import Node
from firedup.ops.containers import check_patches
from firedup.ops.deploy import DeployPlan, for_release
from firedup.patching import PatchReport, PatchStatus
from firedup.patching.manifest import find_patches
from firedup.preflight import PreflightReport, preflight


@dataclass(frozen=True)
class PlanReport:
    plan: DeployPlan
    current: RunMeta | None
    current_alive: bool
    preflight: PreflightReport
    patches: PatchReport | None
    diffs: tuple[tuple[str, str], ...]
    actions: tuple[str, ...]


def _diffs(plan: DeployPlan, patches: PatchReport | None) -> tuple[tuple[str, str], ...]:
    if patches is None:
        return ()
    pending = [o.name for o in patches.outcomes if o.status is PatchStatus.WOULD_APPLY]
    return tuple(
        (p.name, (p.source.parent / p.manifest.diff).read_text(encoding="utf-8"))
        for p in find_patches(pending)
    )


def _actions(
    plan: DeployPlan, current: RunMeta | None, alive: bool, patches: PatchReport | None
) -> tuple[str, ...]:
    rundir, host = plan.rundir, plan.host
    actions = []
    if current is not None and alive:
        actions.append(
            f"stop run {current.run_id}: TERM process group {current.pid}, "
            f"KILL what is left after {STOP_GRACE_S} s"
        )
    for outcome in patches.outcomes if patches else ():
        if outcome.status is PatchStatus.WOULD_APPLY:
            actions.append(
                f"patch {', '.join(outcome.files)}: back up the originals under "
                f"{host.workdir}/patches/backups, write atomically, purge their .pyc, record"
            )
    if plan.deployment.secrets:
        names = ", ".join(f"{n}={MASK}" for n in sorted(plan.deployment.secrets))
        actions.append(f"upload {posixpath.join(rundir, 'secrets.env')} (mode 0600): {names}")
    digest = plan.script.sha256[:12]
    actions += [
        f"upload {posixpath.join(rundir, 'launch.sh')} (mode 0755, sha256 {digest})",
        f"upload {posixpath.join(rundir, 'meta.json')}",
        f"start: cd {rundir} && setsid nohup bash ./launch.sh > server.log 2>&1 < /dev/null &; "
        f"record the pid; point {host.workdir}/current at runs/{plan.run_id}",
        f"wait up to {plan.deployment.ready_timeout_s:.0f} s: follow server.log from byte 0; "
        f"ready when the ready line, our LISTEN on :{plan.deployment.port} and /health 200 agree",
    ]
    return tuple(actions)


def make_plan(node: Node, plan: DeployPlan, *, restart: bool = False) -> PlanReport:
    """Everything a deploy would do, from read-only looks at the node."""
    current = current_run(node, plan.host)
    alive = current is not None and is_alive(node, current)
    patches = None
    if plan.deployment.patches:
        patches = check_patches(node, plan.host, plan.deployment)
    report = preflight(
        node,
        plan.host,
        plan.deployment,
        current=current,
        restart=restart,
        patches=patches,
        placement=plan.placement,
    )
    plan = _for_node_release(plan, report.engine_version)
    return PlanReport(
        plan=plan,
        current=current,
        current_alive=alive,
        preflight=report,
        patches=patches,
        diffs=_diffs(plan, patches),
        actions=_actions(plan, current, alive and restart, patches),
    )


def _for_node_release(plan: DeployPlan, version: str | None) -> DeployPlan:
    """The script for the release preflight read on the node, passed or failed (a failed
    check is printed beside the script it judged); the assumed one when nothing was read or
    the release cannot take a knob (preflight says so)."""
    try:
        return for_release(plan, version)
    except RenderError:
        return plan


def plan_text(report: PlanReport) -> str:
    plan = report.plan
    parts = [
        f"plan for {plan.host.name}: deployment {plan.deployment.name} "
        f"({plan.deployment.engine.value}), run {plan.run_id}",
        "",
        report.preflight.text(),
        "",
        "patches:",
        *(f"  {line}" for line in (report.patches.lines() if report.patches else ["none listed"])),
    ]
    for name, diff in report.diffs:
        parts += ["", f"--- diff of {name} ---", diff.rstrip("\n")]
    parts += ["", f"--- launch.sh ({plan.rundir}/launch.sh) ---", plan.script.text.rstrip("\n")]
    if plan.script.inner:  # in a container: the engine's script, run inside it
        parts += ["", f"--- engine.sh ({plan.rundir}/engine.sh) ---", plan.script.inner.rstrip()]
    parts += ["", "actions on the node:", *(f"  {i}. {a}" for i, a in enumerate(report.actions, 1))]
    if not report.preflight.ok:
        parts += ["", "deploy would stop at preflight: the failed checks above come first"]
    return mask("\n".join(parts))
