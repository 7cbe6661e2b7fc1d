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
from firedup.errors import PatchError, PreflightError, UsageError
from firedup.node.base import Node, script_argv
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


def check_patches(node: Node, host: HostSpec, deployment: Deployment) -> PatchReport:
    """The patches' state, changing nothing: in the node's python, or in the image."""
    runtime = runtime_for(host, deployment)
    if not isinstance(runtime, OciRuntime):
        return sync_patches(node, host, deployment, mode=Mode.CHECK)
    return sync_image_patches(node, host, deployment, runtime, mode=Mode.CHECK)


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


def pull_image(node: Node, host: HostSpec, deployment: Deployment, on_progress: Progress) -> str:
    """`fab pull`: the runtime's pull on the node, a phase of its own with its progress lines;
    returns the image's id."""
    runtime = runtime_for(host, deployment)
    if not isinstance(runtime, OciRuntime):
        raise UsageError(
            f"{host.name}: the engine runs in the node's python (runtime: python): no image to "
            "pull",
            hint="set `runtime: podman` (or docker) and `image:` (docs/containers.md)",
        )
    on_progress(f"pulling {runtime.image} with {runtime.name}")
    last = ""
    pending = b""
    for chunk in node.stream(script_argv("image_pull", *runtime.pull_argv()), timeout_s=30):
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for raw in lines:
            last = raw.decode("utf-8", "replace").strip()
            if last and not last.startswith("pull_exit="):
                on_progress(last)
    code = (pending.decode().strip() or last).removeprefix("pull_exit=")
    if code != "0":
        raise PreflightError(
            f"{host.name}: {runtime.name} pull {runtime.image} failed (exit {code})",
            hint="check the image's name and that the node reaches its registry (and is "
            "logged in to it, for a private one)",
        )
    found = node.run(runtime.image_id_argv(), what="image inspect").out.strip()
    on_progress(f"pulled {runtime.image} ({found[:19]})")
    return found


def sync_image_patches(
    node: Node,
    host: HostSpec,
    deployment: Deployment,
    runtime: OciRuntime,
    *,
    mode: Mode,
    on_progress: Progress = lambda _m: None,
) -> PatchReport:
    """`fab sync-patches` on a container host: check or build the derived image, or remove it
    (`--revert`: the base image was never changed)."""
    name = derived_image_name(runtime.image, deployment.patches)
    present = node.run(runtime.image_id_argv(name), check=False, what="image inspect").ok
    if mode is Mode.APPLY:
        return build_patched_image(node, host, deployment, runtime, on_progress)
    if mode is Mode.REVERT:
        if present:
            node.run([*runtime.cli(), "rmi", name], what=f"rmi {name}")
            on_progress(f"removed {name}; {runtime.image} was never changed")
        return PatchReport(host.name, mode, ())
    with helper_container(
        node, runtime.cli(), name if present else runtime.image, staging_dir(host)
    ) as inside:
        return sync_patches(inside, inside_host(host, runtime.python), deployment, mode=mode)
