"""The one small interface through which firedup touches a node.

Two implementations live in `firedup.node.ssh`: SSH (one persistent Fabric connection) and
local (the demo, or running on the node itself). Everything that touches a node takes a `Node`
as its first argument; everything else is pure.

Commands are argv lists, never shell strings built by formatting. Where a pipeline is needed,
the shell text is a static script shipped in `firedup/node/sh/` and values travel as positional
arguments (`bash -c SCRIPT NAME ARG...`), so no value is ever parsed as shell.
"""

from __future__ import annotations

import getpass
import socket
from collections.abc import Iterator, Sequence
from functools import cache
from importlib import resources
from typing import Protocol

from firedup.errors import CommandResult, RemoteCommandError


class Node(Protocol):
    """A host firedup can run commands on and move files to."""

    @property
    def name(self) -> str: ...

    @property
    def generation(self) -> int:
        """Changes whenever the connection was (re)opened: whatever lived on the old one (a
        lock holder's channel) is gone. Always 0 for a node that never reconnects."""
        ...

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout_s: float = 60.0,
        check: bool = True,
        what: str = "",
    ) -> CommandResult:
        """Run argv; raise RemoteCommandError on a non-zero exit when `check`.

        Raises ConnectError (ConnectionLostError when an open connection dropped) when the
        node cannot be reached; stdin is always empty (EOF at once).
        """
        ...

    def put(self, data: bytes, path: str, *, mode: int = 0o600) -> None:
        """Write `data` to `path` atomically (temporary file, then rename), creating parents."""
        ...

    def get(self, path: str) -> bytes:
        """Read a whole file; raise RemoteCommandError when it does not exist."""
        ...

    def stream(self, argv: Sequence[str], *, timeout_s: float) -> Iterator[bytes]:
        """Run argv and yield its stdout in chunks as they arrive, until it exits.

        Each `timeout_s` without a byte yields b"" (a tick: the caller can check other things
        while the one channel stays open). Closing the iterator stops the command. A dropped
        connection raises ConnectionLostError.
        """
        ...

    def close(self) -> None: ...


@cache
def script_text(name: str) -> str:
    """The text of a static shell script shipped in firedup/node/sh/."""
    return resources.files("firedup.node.sh").joinpath(f"{name}.sh").read_text(encoding="utf-8")


def script_argv(name: str, *args: str) -> list[str]:
    """argv that runs a shipped script with positional args: values never meet the parser."""
    return ["bash", "-c", script_text(name), f"firedup-{name}", *args]


def run_script(
    node: Node,
    name: str,
    *args: str,
    timeout_s: float = 60.0,
    check: bool = True,
    what: str = "",
) -> CommandResult:
    """Run a shipped script on the node."""
    return node.run(script_argv(name, *args), timeout_s=timeout_s, check=check, what=what or name)


def require_ok(result: CommandResult, what: str) -> CommandResult:
    if not result.ok:
        raise RemoteCommandError(result, what)
    return result


def operator() -> str:
    """Who runs firedup, as user@machine: named in locks, runs and history."""
    return f"{getpass.getuser()}@{socket.gethostname()}"
