"""The steps of a deploy that differ in a container: which image runs, and its patches.

A deployment with patches runs a derived image named by the patches' hash
(patching.image.derived_image_name). It is built on the node once: the ordinary patch engine
runs inside a waiting container of the base image (node.runtime.inside), verifies there, and
the container is committed as the derived image. A later deploy with the same base and
patches finds the image and starts at once.
"""

from __future__ import annotations

from collections.abc import Callable

from firedup.config.deployment import Deployment
from firedup.config.inventory import HostSpec
from firedup.errors import PatchError
from firedup.node.base import Node
from firedup.node.runtime import OciRuntime, runtime_for
from firedup.node.runtime.inside import helper_container, inside_host, staging_dir
from firedup.patching import Mode, PatchReport, PatchStatus, sync_patches
from firedup.patching.image import derived_image_name

Progress = Callable[[str], None]


def launch_image(host: HostSpec, deployment: Deployment) -> str | None:
    """The image a deploy runs: the derived one when the deployment names patches."""
    runtime = runtime_for(host, deployment)
    if not isinstance(runtime, OciRuntime) or not deployment.patches:
        return None
    return derived_image_name(runtime.image, deployment.patches)


def apply_patches(
    node: Node, host: HostSpec, deployment: Deployment, on_progress: Progress
) -> PatchReport:
    """The deploy's patch step: in the node's python, or into the derived image."""
    runtime = runtime_for(host, deployment)
    if not isinstance(runtime, OciRuntime):
        return sync_patches(node, host, deployment, on_progress=on_progress)
    return build_patched_image(node, host, deployment, runtime, on_progress)


def build_patched_image(
    node: Node,
    host: HostSpec,
    deployment: Deployment,
    runtime: OciRuntime,
    on_progress: Progress,
) -> PatchReport:
    name = derived_image_name(runtime.image, deployment.patches)
    if node.run(runtime.image_id_argv(name), check=False, what="image inspect").ok:
        on_progress(f"patched image {name} is on the node")
        return check_image(node, host, deployment, runtime, name)
    on_progress(f"building {name}: {', '.join(deployment.patches)} on {runtime.image}")
    with helper_container(node, runtime.cli(), runtime.image, staging_dir(host)) as inside:
        report = sync_patches(
            inside, inside_host(host, runtime.python), deployment, on_progress=on_progress
        )
        label = f"LABEL firedup.patches={','.join(deployment.patches)}"
        node.run(
            [*runtime.cli(), "commit", "--change", label, inside.container, name],
            timeout_s=600,
            what=f"commit {name}",
        )
    on_progress(f"committed {name}")
    return report


def check_image(
    node: Node, host: HostSpec, deployment: Deployment, runtime: OciRuntime, image: str
) -> PatchReport:
    """The patches as the derived image holds them, verified inside a container of it."""
    with helper_container(node, runtime.cli(), image, staging_dir(host)) as inside:
        report = sync_patches(
            inside, inside_host(host, runtime.python), deployment, mode=Mode.CHECK
        )
    held = {PatchStatus.ALREADY_APPLIED, PatchStatus.NOT_NEEDED}
    if any(o.status not in held for o in report.outcomes):
        raise PatchError(
            f"{image} does not hold the patches as they are now: "
            + "; ".join(o.line() for o in report.outcomes),
            hint=f"remove it (`{runtime.name} rmi {image}`) and deploy again to rebuild it",
        )
    return report
