"""An engine image run by podman or docker on the node (the same CLI surface).

The container is named after the run (`firedup-<run id>`), so stop and status find it by the
name firedup chose. It shares the node's network (the server's port is the node's port, and
the listener's pid is visible from the node), mounts the workdir at the same path (the run
directory, its launch script and its server.log are the same files inside and out) and each
model directory read-only. The engine's environment and secrets travel in the run directory
(the launch script and a 0600 secrets.env it reads and removes), never on the runtime's
command line or in `inspect` output, never in an image.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from firedup.config.container import ContainerOptions
from firedup.errors import RenderError
from firedup.node.base import script_text
from firedup.node.runtime.base import ContainerLaunch, Mount

# The GPUs a container is given: node indices (None: every GPU), the CDI kind naming them.
GpuArgs = Callable[[tuple[int, ...] | None, str], list[str]]


@dataclass(frozen=True)
class Flavour:
    binary: str
    gpu_args: GpuArgs
    reads_cdi: bool  # its GPU devices are resolved by the node's CDI specs (preflight reads them)


def cdi_devices(gpus: tuple[int, ...] | None, kind: str) -> list[str]:
    """podman asks for GPUs through CDI (`nvidia-ctk cdi generate`): one device per GPU."""
    names = ["all"] if gpus is None else [str(g) for g in gpus]
    return [arg for name in names for arg in ("--device", f"{kind}={name}")]


def docker_gpus(gpus: tuple[int, ...] | None, kind: str) -> list[str]:
    """docker's --gpus: its value is CSV, so a list of devices is quoted inside it (unquoted,
    `device=1,3` would split at the comma)."""
    del kind  # docker's --gpus goes through the NVIDIA runtime hook, not a CDI kind
    return ["--gpus", "all" if gpus is None else f'"device={",".join(map(str, gpus))}"']


PODMAN = Flavour("podman", cdi_devices, reads_cdi=True)
DOCKER = Flavour("docker", docker_gpus, reads_cdi=False)
RUN_FILE = "runtime.argv"  # the runtime's CLI, NUL separated: the node scripts' way to call it


def container_name(run_id: str) -> str:
    return f"firedup-{run_id}"


def mount_args(mounts: Sequence[Mount]) -> list[str]:
    args: list[str] = []
    for m in mounts:
        if ":" in m.source or ":" in m.target or "," in m.source:
            raise RenderError(f"cannot bind-mount {m.source!r}: ':' and ',' split -v's fields")
        args += ["-v", f"{m.source}:{m.target}{':ro' if m.read_only else ''}"]
    return args


@dataclass(frozen=True)
class OciRuntime:
    flavour: Flavour
    image: str
    options: ContainerOptions = field(default_factory=ContainerOptions)
    in_container: bool = True

    @property
    def name(self) -> str:
        return self.flavour.binary

    @property
    def python(self) -> str:
        return self.options.python

    def cli(self) -> list[str]:
        env = [f"{k}={v}" for k, v in self.options.runtime_env.items()]
        return ["env", *env, self.flavour.binary] if env else [self.flavour.binary]

    def python_argv(self, env: Mapping[str, str], mounts: Sequence[Mount] = ()) -> list[str]:
        return [
            *self.cli(),
            *("run", "--rm", "--network", "host", *mount_args(mounts)),
            *("--entrypoint", "env", self.image),
            *(f"{k}={v}" for k, v in env.items()),
            self.python,
        ]

    def launch_argv(self, launch: ContainerLaunch, image: str | None = None) -> list[str]:
        """`run -d`: the container waits in firedup's init (container_init.sh) until the start
        script has recorded its pid, then runs the rendered engine.sh, logging to server.log.
        It is given exactly the chosen GPUs (`launch.gpus`, node indices; all when None)."""
        given = self.options.gpus == "all"
        gpus = self.flavour.gpu_args(launch.gpus, self.options.cdi_kind) if given else []
        workdir = Mount(launch.workdir, launch.workdir, read_only=False)
        return [
            *self.cli(),
            # --rm: a container that exits (a crash) removes itself; its log is the run's file.
            *("run", "-d", "--rm", "--name", container_name(launch.run_id)),
            *("--label", f"firedup.run={launch.run_id}"),
            *("--network", "host", "--shm-size", self.options.shm_size, *gpus),
            *mount_args([workdir, *launch.mounts]),
            *self.options.run_args,
            *("--entrypoint", "bash", image or self.image),
            *("-c", script_text("container_init"), "firedup-init", launch.rundir),
        ]

    def image_id_argv(self, image: str | None = None) -> list[str]:
        """Prints the image's id; fails when the node does not have it (docker has no
        `image exists`; both answer `image inspect`)."""
        return [*self.cli(), "image", "inspect", "--format", "{{.Id}}", image or self.image]

    def pull_argv(self) -> list[str]:
        return [*self.cli(), "pull", self.image]

    def node_files(self, run_id: str) -> dict[str, bytes]:
        return {RUN_FILE: b"\0".join(a.encode() for a in self.cli()) + b"\0"}

    def start_script(self) -> str:
        return "container_start"

    def stop_script(self) -> str:
        return "container_stop"
