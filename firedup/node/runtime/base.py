"""The Runtime protocol: how the engine's python is reached and how a run is launched."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Mount:
    """A bind mount: `source` on the node at `target` in the container."""

    source: str
    target: str
    read_only: bool = True


@dataclass(frozen=True)
class ContainerLaunch:
    """What a container launch needs beyond the image: the run and what it sees."""

    run_id: str
    workdir: str
    rundir: str
    mounts: tuple[Mount, ...] = ()
    gpus: tuple[int, ...] | None = None  # the node GPUs it is given (None: all of them)


class Runtime(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def in_container(self) -> bool:
        """False for the node's python: the launch is today's script, started by start.sh."""
        ...

    @property
    def python(self) -> str:
        """The engine's interpreter where the engine runs (the node, or inside the image)."""
        ...

    def python_argv(self, env: Mapping[str, str], mounts: Sequence[Mount] = ()) -> list[str]:
        """argv up to and including the engine's python, for `-c SNIPPET ARGS` after it:
        preflight's facts and the patch helpers run where the server will run."""
        ...

    def start_script(self) -> str:
        """The node script (firedup/node/sh/) that starts a run: `SCRIPT WORKDIR RUN_ID`."""
        ...

    def stop_script(self) -> str:
        """The node script that stops a run: `SCRIPT RUNDIR GRACE_S`."""
        ...

    def node_files(self, run_id: str) -> dict[str, bytes]:
        """Files the run directory needs besides launch.sh and meta.json."""
        ...
