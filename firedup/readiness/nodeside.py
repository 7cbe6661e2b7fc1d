"""The log reader that runs on the node, next to the log: what the wait needs, not the log.

Shipped with the wait's command (firedup.readiness.shipping) and run by the node's own
python3: stdlib and firedup.logscan only, Python 3.8 syntax (GPU images carry old pythons).
It follows the run's log from an offset the way `tail -F --pid` would, feeds firedup's
classifier, and writes frames to stdout: a state (the classifier's snapshot, the offset, a
flag when a phase changed or ready was seen) whenever something changed, at most once a
second while only bytes grow, and a heartbeat when nothing happens. It also takes the wait's
looks (firedup/node/sh/probe.sh: process, socket, health) right here, when a phase changes or
ready is seen and on the wait's cadence, and sends their output in the state: a look costs no
round trip and no new channel. When the server's pid is gone it reads to the end of the log
(at disk speed: the link never carries it), looks once more, sends the final state with the
last lines, and exits. A death is told from what the node already read; only bounded text
ever crosses the link.

Frame: `S <length>\\n<json>`; the stream starts with `FIREDUP-READER <nonce>\\n` so output a
login shell printed before it is skipped.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections import deque
from typing import Any, BinaryIO

from firedup.engine import Engine
from firedup.logscan import EventKind, LogScanner, Phase, ScanState, Verdict
from firedup.readiness import nodelook
from firedup.readiness.nodeproc import Summary, alive

READ_BYTES = 256 * 1024  # per read: the loop turns often (states, peeks) inside a burst
POLL_S = 0.1  # how often an idle reader looks for new bytes and for the server's exit
PROGRESS_EVERY_S = 1.0  # at most one "the log grew" state a second
HEARTBEAT_S = 5.0  # a state even when nothing changed: the operator knows the reader lives
TAIL_LINES = 15
LINE_CHARS = 400
URGENT = (EventKind.PHASE, EventKind.READY, EventKind.FATAL)
PROBE_TIMEOUT_S = 10.0
LOOKAHEAD_BYTES = 4 * 1024 * 1024  # this far behind the log's end: peek at the end first
PEEK_BYTES = 256 * 1024  # at most this much of the log's end per peek
PEEK_OVERLAP = 64 * 1024  # re-read of the previous peek: a traceback's start, a cut line
PEEK_EVERY_S = 0.2
SETTLE_S = 0.4  # a failure's traceback has ended when the log is this quiet after it


class Reader:
    """Follows one log file by name from `offset`, like `tail -c +N -F`."""

    def __init__(self, path: str, offset: int) -> None:
        self.path = path
        self.offset = offset
        self.fh: BinaryIO | None = None

    def read(self) -> bytes:
        if self.fh is None:
            try:
                self.fh = open(self.path, "rb")  # noqa: SIM115 - held open across reads
            except OSError:
                return b""
            self.fh.seek(self.offset)
        data = self.fh.read(READ_BYTES)
        self.offset += len(data)
        return data


class Looker:
    """Runs the wait's look (probe.sh) on the node and keeps its cadence."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.script = str(spec["script"])
        self.args = [str(a) for a in spec["args"]]
        self.health_url = str(spec.get("health_url") or "")
        self.live_url = str(spec.get("live_url") or "")  # once ready (watch.LIVENESS)
        self.tick_s = float(spec.get("tick_s") or 1.0)
        self.loading_s = float(spec.get("loading_s") or self.tick_s)
        self.inproc = bool(spec.get("inproc"))  # the look from /proc here (nodelook)
        self.at = 0.0
        self.listening = False
        self.healthy_at_ready = False

    def due(self, phase: Phase, now: float) -> bool:
        """Slow while loading, every tick once the port may be open (the wait's own rule);
        none after a look found the server healthy with its ready line read: that look is
        the one the wait decides on (it looks over a round trip itself if it disagrees)."""
        if self.healthy_at_ready:
            return False
        near = self.listening or phase.order >= Phase.HTTP_UP.order
        return now - self.at >= (self.tick_s if near else self.loading_s)

    def look(self, phase: Phase, now: float) -> str:
        near = self.listening or phase.order >= Phase.HTTP_UP.order
        live = self.live_url if phase is Phase.READY else ""
        url = (live or self.health_url) if near else ""
        out = self._look(url)
        if live and "\nhealth=404" in "\n" + out:  # the release lacks it: /health from now on
            self.live_url = ""
            out = self._look(self.health_url)
        self.at = now
        self.listening = self.listening or any(
            ln.startswith("ss=") and len(ln.strip()) > 3 and ln.strip() != "ss=missing"
            for ln in out.splitlines()
        )
        self.healthy_at_ready = phase is Phase.READY and "\nhealth=200" in "\n" + out
        return out

    def _look(self, url: str) -> str:
        argv = ["bash", "-c", self.script, "firedup-probe", *self.args, "0", "0"]
        argv += [url] if url else []
        out = nodelook.look(self.args[0], int(self.args[1]), url) if self.inproc else None
        if out is None:  # /proc cannot tell: probe.sh, with its forks
            try:
                done = subprocess.run(
                    argv,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,
                    timeout=PROBE_TIMEOUT_S,
                )
                out = done.stdout.decode("ascii", "replace")
            except (OSError, subprocess.TimeoutExpired):
                out = ""
        return out


class Peeker:
    """While the classifier is far behind a burst of log (tens of MB of NCCL INFO lines at
    once), a fresh classifier reads what was added at the log's end since the last peek (up
    to 256 KB, with some overlap): the ready line or a named fatal cause (oom, nccl, ...)
    found there is sent at once, before the backlog is worked through. Only a decisive
    verdict is sent this way; the phases and the final state stay the in-order classifier's."""

    def __init__(self, path: str, engine: str) -> None:
        self.path = path
        self.engine = Engine(engine) if engine else None
        self.at = 0.0
        self.end = 0  # where the last peek stopped
        self.told: object = None

    def peek(self, offset: int, now: float) -> ScanState | None:
        if now - self.at < PEEK_EVERY_S:
            return None
        self.at = now
        try:
            size = os.stat(self.path).st_size
            if size - offset < LOOKAHEAD_BYTES:
                return None
            start = max(size - PEEK_BYTES, self.end - PEEK_OVERLAP, offset)
            with open(self.path, "rb") as fh:
                fh.seek(start)
                data = fh.read(size - start)
            self.end = size
        except OSError:
            return None
        scanner = LogScanner(engine=self.engine)
        scanner.feed(data)
        state = scanner.state
        reason = state.reason
        named = state.verdict is Verdict.FAILED and reason is not None and reason.rank >= 3
        if not (state.verdict is Verdict.READY or named) or state.verdict == self.told:
            return None
        self.told = state.verdict
        return state


class Session:
    """The classifier plus what the operator was last sent."""

    def __init__(self, engine: str, offset: int, nonce: str, looker: Looker | None) -> None:
        self.scanner = LogScanner(engine=Engine(engine) if engine else None)
        self.tail: deque[str] = deque(maxlen=TAIL_LINES)
        self.offset = offset
        self.urgent = False
        self.looker = looker
        self.sent_key: tuple[object, ...] = ()
        self.sent_at = 0.0
        self.sent_offset = -1
        self.summary: Summary | None = None
        self.fed_at = 0.0  # when bytes last came
        self.settled = False  # a failure whose log went quiet was told (once)
        out = sys.stdout.buffer
        out.write(b"\nFIREDUP-READER " + nonce.encode() + b"\n")
        out.flush()

    def feed(self, data: bytes, now: float) -> None:
        self.fed_at = now
        self.offset += len(data)
        events = self.scanner.feed(data)
        self.urgent = self.urgent or any(e.kind in URGENT for e in events)
        text = data.decode("utf-8", "replace").replace("\r", "\n")
        self.tail.extend(ln[:LINE_CHARS] for ln in text.split("\n") if ln.strip())

    def settle(self, now: float) -> None:
        """A failure read, and the log quiet since: the traceback has ended, the cause is
        known; say so at once (the server may take seconds more to exit)."""
        state = self.scanner.state
        if self.settled or state.verdict is not Verdict.FAILED or now - self.fed_at < SETTLE_S:
            return
        self.settled = self.urgent = True
        self.send(state, now, self.looker is not None, False)

    def maybe_send(self, now: float, final: bool = False) -> None:
        state = self.scanner.state
        key = (state.verdict, state.phase, state.reason, state.progress, state.engine)
        changed = key != self.sent_key or self.urgent
        grew = self.offset != self.sent_offset and now - self.sent_at >= PROGRESS_EVERY_S
        # A look when the verdict, phase or cause moved and on the cadence: not on each move
        # of a progress bar, which would fork probe.sh many times a second while loading.
        moved = self.urgent or key[:3] != self.sent_key[:3]
        looks = self.looker is not None and (final or moved or self.looker.due(state.phase, now))
        if not (final or changed or grew or looks or now - self.sent_at >= HEARTBEAT_S):
            return
        self.send(state, now, looks, final)

    def send_ahead(self, state: ScanState, now: float) -> None:
        """A verdict the peek found at the log's end: urgent, with a look."""
        self.urgent = True
        self.send(state, now, self.looker is not None, False, ahead=True)

    def send(
        self, state: ScanState, now: float, looks: bool, final: bool, ahead: bool = False
    ) -> None:
        frame: dict[str, Any] = {"offset": self.offset, "scan": state.to_json()}
        frame["urgent"] = self.urgent
        if ahead:
            frame["ahead"] = True
        if looks and self.looker is not None:
            frame["probe"] = self.looker.look(state.phase, now)
        if final or state.verdict is Verdict.FAILED:
            frame["tail"] = list(self.tail)
        if final:
            frame["exited"] = True
        if self.settled:
            frame["settled"] = True
        body = json.dumps(frame, separators=(",", ":")).encode()
        out = sys.stdout.buffer
        out.write(b"S %d\n" % len(body) + body)
        out.flush()
        if not ahead:
            key = (state.verdict, state.phase, state.reason, state.progress, state.engine)
            if self.summary is not None:
                self.summary.write(state, self.offset, now, final or key[:3] != self.sent_key[:3])
            self.sent_key, self.sent_offset = key, self.offset
        self.sent_at = now
        self.urgent = False


def follow(options: dict[str, Any], nonce: str) -> None:
    """Until the server's pid is gone and the log is read to its end (with `once`, until the
    end of the log as it is now)."""
    pid = options.get("pid")
    once = bool(options.get("once"))  # `fab status`: read to the end now, then stop
    looker = Looker(options["look"]) if options.get("look") else None
    # `once` looks only at the end: no looks on the way through the log.
    engine, offset = str(options.get("engine") or ""), int(options["offset"])
    session = Session(engine, offset, nonce, None if once else looker)
    # Only a reader that saw a run's log from its start summarises it, next to it in the run
    # dir; a log elsewhere (a test's fixture, a file handed over) gets nothing written beside.
    if not once and offset == 0 and os.path.basename(str(options["log"])) == "server.log":
        session.summary = Summary(str(options["log"]))
    reader = Reader(str(options["log"]), int(options["offset"]))
    peeker = Peeker(str(options["log"]), str(options.get("engine") or ""))
    while True:
        running = alive(pid)  # before the read: what the server wrote before dying is read
        ahead = peeker.peek(reader.offset, time.monotonic())
        if ahead is not None:
            session.send_ahead(ahead, time.monotonic())
        data = reader.read()
        if data:
            session.feed(data, time.monotonic())
        elif not running or once:  # `once`: the log's end as it is now, server up or not
            if not running:
                session.scanner.finish()
            session.looker = looker
            session.send(session.scanner.state, time.monotonic(), looker is not None, not running)
            return
        session.maybe_send(time.monotonic())
        if not data:
            session.settle(time.monotonic())
            time.sleep(POLL_S)


def main(argv: list[str]) -> int:
    """argv: NONCE OPTIONS, the options a JSON object: log, offset, pid (or null), engine
    (or ""), look (or null: probe.sh's text, its RUNDIR PORT args, health_url, tick_s,
    loading_s), once (optional: stop at the log's end even while the server runs, after one
    state with a look)."""
    nonce, options = argv
    # BrokenPipeError: the operator closed the channel, nothing is left to tell.
    with contextlib.suppress(BrokenPipeError):
        follow(json.loads(options), nonce)
    return 0
