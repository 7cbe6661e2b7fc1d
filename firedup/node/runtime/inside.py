"""A `Node` that is a running container on a node: what the patch engine works on in an image.

Commands run through the runtime's `exec`; files go in with `cp` (staged in a temporary file on
the node, then renamed inside the container by the same `cp`). Everything above the Node
interface (patching's plan, writes, verification, record) runs unchanged.
"""

from __future__ import annotations

import posixpath
import secrets
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from firedup.config.inventory import HostSpec
from firedup.errors import CommandResult, RemoteCommandError
from firedup.node.base import Node


@dataclass
class InsideContainer:
    node: Node  # the node the container runs on
    cli: tuple[str, ...]  # the runtime's CLI on that node (OciRuntime.cli())
    container: str
    staging: str  # a directory on the node for files on their way in

    @property
    def name(self) -> str:
        return f"{self.node.name}:{self.container}"

    @property
    def generation(self) -> int:
        return self.node.generation

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout_s: float = 60.0,
        check: bool = True,
        what: str = "",
    ) -> CommandResult:
        return self.node.run(
            [*self.cli, "exec", self.container, *argv], timeout_s=timeout_s, check=check, what=what
        )

    def put(self, data: bytes, path: str, *, mode: int = 0o600) -> None:
        staged = posixpath.join(self.staging, f"put-{secrets.token_hex(6)}")
        self.node.put(data, staged, mode=mode)
        try:
            self.run(["mkdir", "-p", "--", posixpath.dirname(path)], what=f"mkdir for {path}")
            self.node.run([*self.cli, "cp", staged, f"{self.container}:{path}"], what=f"cp {path}")
            self.run(["chmod", oct(mode)[2:], "--", path], what=f"chmod {path}")
        finally:
            self.node.run(["rm", "-f", "--", staged], check=False)

    def get(self, path: str) -> bytes:
        result = self.run(["cat", "--", path], check=False, what=f"read {path}")
        if not result.ok:
            raise RemoteCommandError(result, f"read {path} in {self.container}")
        return result.stdout

    def stream(self, argv: Sequence[str], *, timeout_s: float) -> Iterator[bytes]:
        return self.node.stream([*self.cli, "exec", self.container, *argv], timeout_s=timeout_s)

    def close(self) -> None:
        """The container belongs to whoever made it; the node connection to its owner."""


@contextmanager
def helper_container(
    node: Node, cli: Sequence[str], image: str, staging: str
) -> Iterator[InsideContainer]:
    """A container of `image` that only waits (no network), for looking and writing inside;
    removed on the way out, whatever happened."""
    name = f"firedup-helper-{secrets.token_hex(4)}"
    argv = [*cli, "run", "-d", "--name", name, "--network", "none"]
    node.run([*argv, "--entrypoint", "sleep", image, "infinity"], what=f"start {name}")
    try:
        yield InsideContainer(node, tuple(cli), name, staging)
    finally:
        node.run([*cli, "rm", "-f", "-t", "0", name], check=False, what=f"remove {name}")


IMAGE_STATE_DIR = "/var/lib/firedup"  # the patch record and backups, inside a derived image


def inside_host(host: HostSpec, python: str) -> HostSpec:
    """The host as the patch engine sees it inside a container: the image's python, no node
    env (the image brings its own), its state in the image."""
    return host.model_copy(update={"python": python, "env": {}, "workdir": IMAGE_STATE_DIR})


def staging_dir(host: HostSpec) -> str:
    return posixpath.join(host.workdir, ".staging")
