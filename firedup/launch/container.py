"""The launch script of a run in a container: the runtime's `run -d` around the engine's script.

`launch.sh` (run on the node by container_start.sh) starts the container; `engine.sh` (today's
template, with the image's python and the deployment's env) runs inside it. The image is the
deployment's, or its patched derivative when it names patches (ops.containers).
"""

from __future__ import annotations

import posixpath
import shlex

from firedup.config.inventory import Deployment, HostSpec
from firedup.config.slots import gpu_request
from firedup.node.runtime.base import ContainerLaunch, Mount
from firedup.node.runtime.oci import OciRuntime


def model_mounts(deployment: Deployment) -> tuple[Mount, ...]:
    """Each model given as a directory on the node, read-only at the same path."""
    models = [deployment.model, *([deployment.draft_model] if deployment.draft_model else [])]
    seen = dict.fromkeys(posixpath.normpath(m) for m in models if posixpath.isabs(m))
    return tuple(Mount(path, path) for path in seen)


def device_gpus(
    runtime: OciRuntime, host: HostSpec, deployment: Deployment, gpus: tuple[int, ...] | None
) -> tuple[int, ...] | None:
    """The node GPUs the container is given: the set chosen on the node (`gpus: auto`), else
    the listed one (`gpus:` or CUDA_VISIBLE_DEVICES); None when every GPU is (no selection)
    or none is (`container.gpus: none`: no device asked of the runtime)."""
    if runtime.options.gpus == "none":
        return None
    env = {**host.env, **deployment.env}  # where a listed set may be CUDA_VISIBLE_DEVICES
    chosen = gpus if gpus is not None else gpu_request(deployment.gpu_set, env)
    return chosen if isinstance(chosen, tuple) else None


def inside_gpus(devices: tuple[int, ...]) -> tuple[int, ...]:
    """How the engine sees the GPUs it was given: renumbered from 0 (the runtime exposes only
    those devices, and CUDA numbers what it sees), so CUDA_VISIBLE_DEVICES inside names 0..n-1,
    never the node's indices (which would select GPUs the container does not have)."""
    return tuple(range(len(devices)))


def container_launch(
    runtime: OciRuntime,
    host: HostSpec,
    deployment: Deployment,
    *,
    run_id: str,
    rundir: str,
    image: str | None = None,
    gpus: tuple[int, ...] | None = None,
) -> str:
    """launch.sh of the run: the runtime's `run -d` of `image` (the deployment's patched
    image, ops.containers.launch_image) or else of the inventory's image, given the node GPUs
    `gpus` (device_gpus; all when None)."""
    mounts = model_mounts(deployment)
    launch = ContainerLaunch(run_id, host.workdir, rundir, mounts, gpus)
    argv = runtime.launch_argv(launch, image)
    text = (
        "#!/usr/bin/env bash\n"
        f"# Rendered by firedup: host {host.name}, deployment {deployment.name}, run {run_id}.\n"
        f"# The {runtime.name} container of the run; engine.sh beside it runs inside.\n"
        "set -euo pipefail\n"
        f"exec {shlex.join(argv)}\n"
    )
    return text
