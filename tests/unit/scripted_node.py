"""A scripted fake node and a fake clock, to drive the wait loop through time in a unit test.

This is the one place a fake node is right (issue 13): the real node is tested over sshd in
tests/ssh; here the loop's own decisions (when to look, when to give up, where to resume) are
checked deterministically, in milliseconds, against a server that follows a script. The node
answers exactly the two things the wait uses: `stream` (like `tail -c +N -F --pid`) and `run`
of the probe script (its key=value output, as firedup/node/sh/probe.sh prints it).
"""

from __future__ import annotations

import base64
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from firedup.errors import CommandResult, ConnectionLostError

PID = 4242


@dataclass
class FakeClock:
    """Monotonic seconds that move only when the loop sleeps or a quiet stream read blocks."""

    now: float = 1000.0
    slept: list[float] = field(default_factory=list)

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


@dataclass(frozen=True)
class Step:
    """What happens to the server `at` seconds after the script starts."""

    at: float
    log: bytes = b""
    listening: bool | None = None
    health: int | None = None
    dies: bool = False
    drop: bool = False  # the SSH connection drops: the open stream raises


class ScriptedNode:
    """A node whose one server follows `steps` on `clock`; records what the loop asked."""

    name = "fake"
    generation = 0

    def __init__(self, clock: FakeClock, steps: Sequence[Step], port: int = 30000) -> None:
        self.clock = clock
        self.t0 = clock()
        self.steps = sorted(steps, key=lambda s: s.at)
        self.port = port
        self.log = b""
        self.alive = True
        self.listening = False
        self.health = 0  # 0: nothing answers yet
        self.dropped = False
        self.stream_offsets: list[int] = []
        self.drop_offsets: list[int] = []  # bytes a stream had delivered when it dropped
        self.probes: list[float] = []  # script time of each look
        self.argvs: list[list[str]] = []

    def elapsed(self) -> float:
        return self.clock() - self.t0

    def _advance(self) -> None:
        while self.steps and self.steps[0].at <= self.elapsed():
            step = self.steps.pop(0)
            self.log += step.log
            self.listening = self.listening if step.listening is None else step.listening
            self.health = self.health if step.health is None else step.health
            self.alive = self.alive and not step.dies
            self.dropped = self.dropped or step.drop

    def run(
        self, argv: Sequence[str], *, timeout_s: float = 60.0, check: bool = True, what: str = ""
    ) -> CommandResult:
        self.argvs.append(list(argv))
        assert argv[3] == "firedup-probe", f"the wait ran something else: {argv[3]}"
        self._advance()
        self.probes.append(self.elapsed())
        _rundir, port, offset, max_bytes, health_url = argv[4:9]
        ss = f'LISTEN 0 5 127.0.0.1:{port} 0.0.0.0:* users:(("python3",pid={PID + 1},fd=3))'
        chunk = self.log[int(offset) : int(offset) + int(max_bytes)]
        lines = [
            f"now={self.clock():.6f}",
            f"pid={PID}",
            f"procs={PID},{PID + 1}" if self.alive else "procs=",
            "ss=" + base64.b64encode(ss.encode() if self.listening else b"").decode(),
            f"log_size={len(self.log)}",
            "log=" + base64.b64encode(chunk).decode(),
        ]
        if health_url:
            lines.append(f"health={self.health:03d}")
        return CommandResult(tuple(argv), 0, ("\n".join(lines) + "\n").encode(), host=self.name)

    def stream(self, argv: Sequence[str], *, timeout_s: float) -> Iterator[bytes]:
        assert argv[0] == "tail" and f"--pid={PID}" in argv
        offset = int(argv[argv.index("-c") + 1].removeprefix("+")) - 1
        self.stream_offsets.append(offset)
        return self._follow(offset, timeout_s)

    def _follow(self, pos: int, tick_s: float) -> Iterator[bytes]:
        while True:
            self._advance()
            if self.dropped:
                self.dropped = False
                self.drop_offsets.append(pos)
                raise ConnectionLostError("fake: connection dropped")
            if pos < len(self.log):
                chunk, pos = self.log[pos:], len(self.log)
                yield chunk
            elif not self.alive:
                return  # `tail --pid` ends once the server is gone and the file is read
            else:
                self.clock.now += tick_s  # a quiet read blocks for one tick
                yield b""

    def put(self, data: bytes, path: str, *, mode: int = 0o644) -> None:
        raise AssertionError("the wait never writes to the node")

    def get(self, path: str) -> bytes:
        raise AssertionError("the wait reads the node through the probe and the stream")

    def close(self) -> None:
        return None


def log_steps(text: bytes, *, start: float = 0.0, every_s: float = 0.25) -> list[Step]:
    """One step per log line, `every_s` apart, as a server writes its startup log."""
    lines = text.splitlines(keepends=True)
    return [Step(at=start + i * every_s, log=line) for i, line in enumerate(lines)]
