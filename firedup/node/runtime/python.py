"""The engine installed in a python on the node: what firedup always did."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from firedup.node.runtime.base import Mount


@dataclass(frozen=True)
class PythonRuntime:
    python: str = "python3"
    name: str = "python"
    in_container: bool = False

    def python_argv(self, env: Mapping[str, str], mounts: Sequence[Mount] = ()) -> list[str]:
        del mounts  # the node's own files: nothing to mount
        return ["env", *(f"{k}={v}" for k, v in env.items()), self.python]

    def start_script(self) -> str:
        return "start"

    def stop_script(self) -> str:
        return "stop"

    def node_files(self, run_id: str) -> dict[str, bytes]:
        return {}
