"""A scripted fake node and a fake clock, to drive the wait loop through time in a unit test.

This is the one place a fake node is right (issue 13): the real node is tested over sshd in
tests/ssh; here the loop's own decisions (when to look, when to give up, where to resume) are
checked deterministically, in milliseconds, against a server that follows a script.

The node answers what the wait uses. `stream` of the reader command: the REAL node-side
reader (firedup.readiness.nodeside: its classifier, its framing, its cadence of states,
heartbeats and looks) runs here in process on the fake clock, reading the scripted log; only
its two edges are the script's: the log bytes and the output of its looks (probe.sh).
`stream` of `tail -c +N -F --pid` and `run` of probe.sh serve the fallback for a node whose
python3 is missing (no marker) or too old (the RAW marker, then the plain log).
"""

from __future__ import annotations

import base64
import io
import json
import subprocess
import types
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, redirect_stdout
from dataclasses import dataclass, field
from unittest import mock

from firedup.errors import CommandResult, ConnectionLostError
from firedup.readiness import nodeside

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
    """A node whose one server follows `steps` on `clock`; records what the loop asked.

    `python`: "reader" (python3 runs the shipped reader), "old" (python3 too old: the boot
    script prints the RAW marker and execs tail), "none" (no python3: the stream ends empty)."""

    name = "fake"
    generation = 0

    def __init__(
        self, clock: FakeClock, steps: Sequence[Step], port: int = 30000, python: str = "reader"
    ) -> None:
        self.clock = clock
        self.t0 = clock()
        self.steps = sorted(steps, key=lambda s: s.at)
        self.port = port
        self.python = python
        self.log = b""
        self.alive = True
        self.listening = False
        self.health = 0  # 0: nothing answers yet
        self.dropped = False
        self.streams: list[tuple[str, int]] = []  # ("reader" | "tail", the offset it starts at)
        self.drop_offsets: list[int] = []  # the offset the operator had when a stream dropped
        self.probes: list[float] = []  # script time of each look (node-side or round trip)
        self.argvs: list[list[str]] = []  # what `run` ran

    @property
    def stream_offsets(self) -> list[int]:
        return [offset for _kind, offset in self.streams]

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

    def _probe_text(self, port: str, offset: int, max_bytes: int, health_url: str) -> bytes:
        """probe.sh's key=value output for the server as it is now."""
        self._advance()
        self.probes.append(self.elapsed())
        ss = f'LISTEN 0 5 127.0.0.1:{port} 0.0.0.0:* users:(("python3",pid={PID + 1},fd=3))'
        chunk = self.log[offset : offset + max_bytes]
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
        return ("\n".join(lines) + "\n").encode()

    def run(
        self, argv: Sequence[str], *, timeout_s: float = 60.0, check: bool = True, what: str = ""
    ) -> CommandResult:
        self.argvs.append(list(argv))
        assert argv[3] == "firedup-probe", f"the wait ran something else: {argv[3]}"
        _rundir, port, offset, max_bytes, health_url = argv[4:9]
        out = self._probe_text(port, int(offset), int(max_bytes), health_url)
        return CommandResult(tuple(argv), 0, out, host=self.name)

    def stream(self, argv: Sequence[str], *, timeout_s: float) -> Iterator[bytes]:
        if argv[0] == "python3":
            assert argv[1] == "-c" and len(argv) > 6, argv[:2]
            nonce, options, tail = argv[4], json.loads(argv[5]), argv[6:]
            assert options["pid"] == PID and options["log"].endswith("server.log"), options
            if self.python == "reader":
                self.streams.append(("reader", int(options["offset"])))
                return self._reader(options, nonce, timeout_s)
            if self.python == "none":
                return iter(())  # `python3: command not found` goes to stderr
            return self._raw(nonce, tail, timeout_s)
        return self._tail(argv, timeout_s)

    def _raw(self, nonce: str, tail: Sequence[str], tick_s: float) -> Iterator[bytes]:
        """The boot script on an old python3: the RAW marker, then `exec tail`."""
        yield b"Welcome to the node\n\nFIREDUP-RAW " + nonce.encode() + b"\n"
        yield from self._tail(tail, tick_s)

    def _tail(self, argv: Sequence[str], tick_s: float) -> Iterator[bytes]:
        assert argv[0] == "tail" and f"--pid={PID}" in argv, argv
        pos = int(argv[argv.index("-c") + 1].removeprefix("+")) - 1
        self.streams.append(("tail", pos))
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

    @contextmanager
    def _on_node(self) -> Iterator[io.BytesIO]:
        """While the reader's code runs: its stdout is the channel, its looks are scripted."""

        def look(argv: Sequence[str], **_kw: object) -> subprocess.CompletedProcess[bytes]:
            assert argv[:2] == ["bash", "-c"] and argv[3] == "firedup-probe", argv[:4]
            _rundir, port, offset, max_bytes, *health = argv[4:]
            out = self._probe_text(port, int(offset), int(max_bytes), "".join(health))
            return subprocess.CompletedProcess(list(argv), 0, out)

        shim = types.SimpleNamespace(
            run=look,
            PIPE=subprocess.PIPE,
            DEVNULL=subprocess.DEVNULL,
            TimeoutExpired=subprocess.TimeoutExpired,
        )
        channel = io.BytesIO()
        text = io.TextIOWrapper(channel, write_through=True)
        with redirect_stdout(text), mock.patch.object(nodeside, "subprocess", shim):
            yield channel
        text.detach()

    def _reader(self, options: dict[str, object], nonce: str, tick_s: float) -> Iterator[bytes]:
        """nodeside.follow on the fake clock: the real Session (classifier, frames, looks);
        the log is the script's, the server's pid is alive until a step says it dies."""
        look = options.get("look")
        with self._on_node() as out:
            # The looks are the script's (its fake probe), never this machine's /proc.
            looker = nodeside.Looker({**look, "inproc": False}) if isinstance(look, dict) else None
            pos = int(str(options["offset"]))
            session = nodeside.Session(str(options["engine"]), pos, nonce, looker)
        quiet_since, sent = self.clock(), out.getvalue()
        while True:
            self._advance()
            if self.dropped:
                self.dropped = False
                self.drop_offsets.append(session.sent_offset)
                raise ConnectionLostError("fake: connection dropped")
            running, now = self.alive, self.clock()  # before the read, as nodeside.follow
            data, pos, done = self.log[pos:], len(self.log), False
            with self._on_node() as out:
                if data:
                    session.feed(data, now)
                elif not running:
                    session.scanner.finish()
                    session.maybe_send(now, final=True)
                    done = True
                if not done:
                    session.maybe_send(now)
                if not done and not data:
                    session.settle(now)
            sent += out.getvalue()
            if sent or done or now - quiet_since >= tick_s:
                yield sent  # the channel delivers what was written; b"" after a quiet tick
                sent, quiet_since = b"", now
            if done:
                return
            if not data:
                self.clock.now += nodeside.POLL_S

    def put(self, data: bytes, path: str, *, mode: int = 0o644) -> None:
        raise AssertionError("the wait never writes to the node")

    def get(self, path: str) -> bytes:
        raise AssertionError("the wait reads the node through its reader and its looks")

    def close(self) -> None:
        return None


def log_steps(text: bytes, *, start: float = 0.0, every_s: float = 0.25) -> list[Step]:
    """One step per log line, `every_s` apart, as a server writes its startup log."""
    lines = text.splitlines(keepends=True)
    return [Step(at=start + i * every_s, log=line) for i, line in enumerate(lines)]
