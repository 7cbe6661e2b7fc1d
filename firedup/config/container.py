"""Where the engine runs on a node: a python there (the default) or an image in a container.

`runtime:` and `image:` may be set on a host or on a deployment (the deployment's wins: an
image pins an engine release, which is the deployment's business); `container:` holds the
rest. Validated once at load, like every inventory key (docs/containers.md).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

RuntimeName = Literal["python", "podman", "docker"]
CONTAINER_RUNTIMES = frozenset({"podman", "docker"})


class ContainerOptions(BaseModel):
    """How a container is run: what the runtime's `run` gets besides the image."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    python: str = "python3"  # the engine's interpreter inside the image
    shm_size: str = Field(default="16g", pattern=r"^[0-9]+[bkmg]?$")
    gpus: Literal["all", "none"] = "all"  # "none": no GPU device asked of the runtime
    # podman's CDI kind of the node's GPUs (`nvidia-ctk cdi generate` names them so); docker
    # asks through --gpus and ignores it.
    cdi_kind: str = Field(
        default="nvidia.com/gpu", pattern=r"^[a-z0-9][a-z0-9.-]*/[a-zA-Z0-9][a-zA-Z0-9_.-]*$"
    )
    # The environment of the runtime's own CLI on the node (CONTAINERS_CONF, DOCKER_HOST):
    # not the engine's, which is `env:`.
    runtime_env: dict[str, str] = Field(default_factory=dict)
    run_args: tuple[str, ...] = ()  # passed to `run` as they are, before the image


def effective_runtime(host_value: str | None, deployment_value: str | None) -> str:
    return deployment_value or host_value or "python"


def check_image(where: str, runtime: str, image: str | None) -> None:
    """A container runtime needs an image, named on the deployment or on the host."""
    if runtime != "python" and not image:
        raise ValueError(
            f"{where}: runtime {runtime} needs an image: set 'image:' on the deployment or on "
            "the host (e.g. lmsysorg/sglang:v0.5.9)"
        )
