"""Where the engine runs on a node: the one seam every step asks (docs/containers.md).

`runtime_for(host, deployment)` gives a `Runtime`: `PythonRuntime` (the node's python, as
always) or `OciRuntime` (podman or docker, same CLI surface; docker differs in how it is
asked for GPUs). Render, start, stop, preflight and patches call it, never an `if`.
"""

from __future__ import annotations

from firedup.config.container import effective_runtime
from firedup.config.deployment import Deployment
from firedup.config.inventory import HostSpec
from firedup.errors import InventoryError
from firedup.node.runtime.base import Mount, Runtime
from firedup.node.runtime.oci import DOCKER, PODMAN, OciRuntime
from firedup.node.runtime.python import PythonRuntime

__all__ = ["Mount", "OciRuntime", "PythonRuntime", "Runtime", "runtime_for", "stop_script"]


def runtime_for(host: HostSpec, deployment: Deployment) -> Runtime:
    name = effective_runtime(host.runtime, deployment.runtime)
    if name == "python":
        return PythonRuntime(host.python)
    image = deployment.image or host.image
    if not image:
        raise InventoryError(
            f"host {host.name} (deployment {deployment.name}): runtime {name} needs 'image:'",
            hint="name the engine's image on the deployment, e.g. image: lmsysorg/sglang:v0.5.9",
        )
    flavour = PODMAN if name == "podman" else DOCKER
    return OciRuntime(flavour=flavour, image=image, options=host.container)


def stop_script(runtime_name: str) -> str:
    """The stop script of a run started by `runtime_name` (RunMeta.runtime, as recorded)."""
    return PythonRuntime().stop_script() if runtime_name == "python" else "container_stop"
