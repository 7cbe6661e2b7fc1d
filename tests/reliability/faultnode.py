"""A Node that injects faults between (or in place of the answers of) firedup's remote calls.

The drops are real: `kill_connections` SIGKILLs our sshd's per-connection processes, so the
TCP connection, its channels and whatever the node ran in them see what a dropped link does.
`lose_answer` models the one window a kill cannot aim at: the command ran on the node, and
the connection died before its answer came back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from firedup.errors import CommandResult, ConnectionLostError
from tests.conftest import Sshd
from tests.reliability import tally
from tests.reliability.helpers import kill_connections


def op_name(argv: Sequence[str]) -> str:
    """`bash -c SCRIPT firedup-NAME ...` -> NAME; otherwise the command."""
    if len(argv) > 3 and argv[0] == "bash" and argv[1] == "-c":
        return argv[3].removeprefix("firedup-")
    if "-c" in argv and argv[0] == "env":
        return "python-helper"
    return argv[0]


@dataclass
class FaultNode:
    inner: Any
    sshd: Sshd
    drop_before: set[int] = field(default_factory=set)
    lose_answer: Callable[[str], bool] = lambda _name: False
    before_op: Callable[[str], None] = lambda _name: None  # any other fault, by op name
    ops: list[str] = field(default_factory=list)

    @property
    def generation(self) -> int:
        return int(getattr(self.inner, "generation", 0))

    @property
    def name(self) -> str:
        return str(self.inner.name)

    def _op(self, name: str) -> None:
        self.before_op(name)
        if len(self.ops) in self.drop_before:
            kill_connections(self.sshd)
        self.ops.append(name)

    def run(self, argv: Sequence[str], **kw: Any) -> CommandResult:
        name = op_name(argv)
        self._op(name)
        result: CommandResult = self.inner.run(argv, **kw)
        if self.lose_answer(name):
            self.lose_answer = lambda _name: False
            kill_connections(self.sshd)
            tally.fault("answer lost after the command ran")
            raise ConnectionLostError(f"{self.name}: connection lost during {argv[0]}")
        return result

    def put(self, data: bytes, path: str, *, mode: int = 0o644) -> None:
        self._op(f"put {path.rsplit('/', 1)[-1]}")
        self.inner.put(data, path, mode=mode)

    def get(self, path: str) -> bytes:
        self._op(f"get {path.rsplit('/', 1)[-1]}")
        data: bytes = self.inner.get(path)
        return data

    def stream(self, argv: Sequence[str], *, timeout_s: float) -> Iterator[bytes]:
        self._op(f"stream {op_name(argv)}")
        yield from self.inner.stream(argv, timeout_s=timeout_s)

    def close(self) -> None:
        self.inner.close()
