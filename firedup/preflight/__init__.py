"""Preflight: predict the launch failures that can be predicted, before a 30-minute launch.

One round trip gathers the node's facts (node_facts.py, run by the node's python), one more
checks the deployment's patches; the checks themselves are pure (checks.py).
"""

from __future__ import annotations

from dataclasses import replace

from firedup.config.deployment import Deployment
from firedup.config.inventory import HostSpec, Placement
from firedup.errors import RenderError
from firedup.launch.render import launch_env, render_launch
from firedup.launch.runs import RunMeta
from firedup.node.base import Node
from firedup.node.runtime import OciRuntime, runtime_for
from firedup.node.runtime.inside import helper_container, inside_host, staging_dir
from firedup.patching import Mode, PatchReport, sync_patches
from firedup.preflight.cdi import device_checks
from firedup.preflight.checks import Situation, run_checks
from firedup.preflight.facts import NodeFacts, gather_facts
from firedup.preflight.gpuchoice import with_choice
from firedup.preflight.image import container_facts
from firedup.preflight.model import Check, Outcome, PreflightReport

__all__ = ["Check", "NodeFacts", "Outcome", "PreflightReport", "preflight"]


def preflight(
    node: Node,
    host: HostSpec,
    deployment: Deployment,
    *,
    current: RunMeta | None,
    restart: bool = False,
    patches: PatchReport | None = None,
    placement: Placement | None = None,
) -> PreflightReport:
    """Look at the node (read-only) and judge the launch. Raises nothing for a failed check:
    the report says; the caller decides (deploy refuses, plan prints)."""
    runtime = runtime_for(host, deployment)
    image: tuple[Check, ...] = ()
    if isinstance(runtime, OciRuntime):
        facts, check = container_facts(node, host, deployment, runtime)
        image = (check,)
        if patches is None and deployment.patches and check.outcome is Outcome.PASS:
            patches = image_patches(node, host, deployment, runtime)
    else:
        facts = gather_facts(node, host, deployment)
        if patches is None and deployment.patches:
            patches = sync_patches(node, host, deployment, mode=Mode.CHECK)
    situation = judged(host, deployment, facts, current, restart, patches, placement)
    if isinstance(runtime, OciRuntime):
        image += device_checks(node, host, deployment, runtime, situation.gpus_chosen)
    return PreflightReport(
        host=host.name,
        checks=(*image, *run_checks(situation)),
        engine_version=facts.engine_version,
        gpus=situation.gpus_chosen,
        gpus_why=situation.gpus_why,
    )


def judged(
    host: HostSpec,
    deployment: Deployment,
    facts: NodeFacts,
    current: RunMeta | None,
    restart: bool,
    patches: PatchReport | None,
    placement: Placement | None,
) -> Situation:
    """What the checks look at (pure): the facts, the script for the node's release and the
    GPUs the launch will use, chosen from those facts."""
    situation = Situation(
        facts=facts,
        deployment=deployment,
        patches=patches,
        our_sid=current.pid if current else None,
        our_run=current.run_id if current else None,
        restart=restart,
        accelerator=host.accelerator,
        launch_env=launch_env(host, deployment),
    )
    situation = with_choice(situation, launch_env(host, deployment))
    script, error = _rendered(host, deployment, placement, facts, situation)
    return replace(situation, script=script, render_error=error)


def _rendered(
    host: HostSpec,
    deployment: Deployment,
    placement: Placement | None,
    facts: NodeFacts,
    s: Situation,
) -> tuple[str | None, str | None]:
    """The script as a deploy would render it for the node's release (pure), or why not."""
    if not facts.engine_version:
        return None, None
    try:
        script = render_launch(
            host,
            deployment,
            run_id="preflight",
            rundir=host.workdir,
            placement=placement,
            engine_version=facts.engine_version,
            gpus=s.gpus_chosen if deployment.gpus == "auto" else None,
        )
    except RenderError as exc:
        return None, str(exc)
    return script.inner or script.text, None  # in a container: the engine's script


def image_patches(
    node: Node, host: HostSpec, deployment: Deployment, runtime: OciRuntime
) -> PatchReport:
    """The patches checked inside a throwaway container of the deployment's image."""
    with helper_container(node, runtime.cli(), runtime.image, staging_dir(host)) as inside:
        host_inside = inside_host(host, runtime.python)
        return sync_patches(inside, host_inside, deployment, mode=Mode.CHECK)
