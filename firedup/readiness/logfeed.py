"""What the wait knows from a run's log, read on the node when it can be, here when it cannot.

Node mode (the default): the node-side reader (firedup.readiness.nodeside, shipped with the
command by firedup.readiness.shipping) classifies the log next to it and sends states;
nothing but bounded text crosses the link, so a slow link does not delay ready or a crash
behind megabytes of log. Raw mode: the node has no python3 >= 3.8 that runs the reader, so
the log itself streams (`tail -F --pid`) and is classified here, as before.

Either way `updates()` follows until the server's main pid is gone and its log is read.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

from firedup.engine import Engine
from firedup.errors import CommandTimeoutError
from firedup.launch.runs import RunMeta
from firedup.logscan import (
    HINTS,
    EarlierLaunch,
    EventKind,
    LogScanner,
    Phase,
    PhaseSpan,
    Progress,
    Reason,
    ScanState,
    Verdict,
)
from firedup.node.base import Node
from firedup.node.probe import Probe, ProbeParseError, parse_probe
from firedup.readiness.shipping import FrameParser, new_nonce, reader_argv

TAIL_LINES = 15
Update = tuple[bool, Probe | None]
TAIL_SLEEP_S = "0.2"  # how often `tail --pid` checks that the server is still alive


def _when(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def _progress(data: dict[str, Any] | None) -> Progress | None:
    return Progress(data["label"], data["done"], data["total"]) if data else None


def _earlier(data: dict[str, Any] | None) -> EarlierLaunch | None:
    if not data:
        return None
    reason = Reason(data["reason"]) if data.get("reason") else None
    return EarlierLaunch(Verdict(data["verdict"]), Phase(data["phase"]), reason, data["stopped"])


def scan_from_json(data: dict[str, Any]) -> ScanState:
    """The inverse of ScanState.to_json: the node's snapshot as the operator's value. The node
    ships no hint texts (shipping.STAND_INS): a reason's hint comes from the operator's table."""
    reason = Reason(data["reason"]) if data.get("reason") else None
    return ScanState(
        verdict=Verdict(data["verdict"]),
        phase=Phase(data["phase"]),
        reason=reason,
        hint=data.get("hint") or (HINTS.get(reason) if reason else None),
        excerpt=tuple(data.get("excerpt") or ()),
        progress=_progress(data.get("progress")),
        engine=Engine(data["engine"]) if data.get("engine") else None,
        phases=tuple(
            PhaseSpan(
                Phase(s["phase"]),
                _when(s.get("start")),
                _when(s.get("end")),
                _progress(s.get("progress")),
            )
            for s in data.get("phases") or ()
        ),
        bytes_seen=int(data.get("bytes_seen") or 0),
        lines_seen=int(data.get("lines_seen") or 0),
        last_line=str(data.get("last_line") or ""),
        last_timestamp=_when(data.get("last_timestamp")),
        launches=int(data.get("launches") or 1),
        earlier=_earlier(data.get("earlier")),
    )


def _probe(text: str | None) -> Probe | None:
    """The look the node took, if it sent one that parses (a timed-out look sends nothing)."""
    if not text:
        return None
    try:
        return parse_probe(text.encode("ascii", "replace"))
    except ProbeParseError:
        return None


def tail_argv(run: RunMeta, offset: int) -> list[str]:
    """Follow the log from `offset`; `--pid` ends the stream soon after the server dies."""
    argv = ["tail", "-c", f"+{offset + 1}", "-F", "-s", TAIL_SLEEP_S]
    if run.pid is not None:
        argv.append(f"--pid={run.pid}")
    return [*argv, run.log_path]


def reader_options(run: RunMeta, look: dict[str, Any] | None) -> dict[str, Any]:
    """What the node reader is told about a run (nodeside.main). It always starts at the top:
    its classifier must see the whole story (a reconnect re-reads at disk speed on the node;
    the link carries only states)."""
    return {
        "log": run.log_path,
        "offset": 0,
        "pid": run.pid,
        "engine": run.engine.value,
        "look": look,
    }


class LogFeed:
    """The classifier's view of one run's log, and where it comes from."""

    def __init__(self, run: RunMeta, on_failed: Callable[[], None]) -> None:
        self.run = run
        self.on_failed = on_failed
        self.node_side = True  # until the node shows it cannot run the reader
        self.scanner = LogScanner(engine=run.engine)  # raw mode only
        self.scan: ScanState = self.scanner.state
        self.offset = 0  # bytes of the log classified (wherever that happened)
        self.raw_offset = 0  # bytes of the log that crossed the link (raw mode)
        self.tail: list[str] = []
        self.final = False  # the node reader read the log to its end after the server exited
        self.heard = False  # bytes came from the node since the caller last looked (and reset)
        self.settled = False  # the node saw a failure's log go quiet: its traceback has ended

    def updates(self, node: Node, tick_s: float, look: dict[str, Any] | None) -> Iterator[Update]:
        """Follow the log; yield after each piece and each quiet tick: whether a phase changed
        or ready was seen (worth a look now), and the look the node took, if it sent one.
        Ends when the server's pid is gone. `look`: the node's looks (see nodeside.Looker)."""
        if not self.node_side:
            for chunk in node.stream(tail_argv(self.run, self.raw_offset), timeout_s=tick_s):
                self.heard = self.heard or bool(chunk)
                yield (self.feed(chunk) if chunk else False), None
            return
        nonce = new_nonce()
        parser = FrameParser(nonce)
        options = reader_options(self.run, look)
        argv = reader_argv(options, nonce, tail_argv(self.run, self.raw_offset))
        for chunk in node.stream(argv, timeout_s=tick_s):
            self.heard = self.heard or bool(chunk)
            states, raw = parser.feed(chunk)
            if parser.mode == "raw":
                self.node_side = False
            if raw:
                yield self.feed(raw), None
            if not states:
                yield False, None
            for state in states:
                urgent = self.apply(state)
                yield urgent, _probe(state.get("probe"))
        if parser.mode is None:
            self.node_side = False  # no python3 at all: the next follow streams the log

    def apply(self, frame: dict[str, Any]) -> bool:
        """Take a state the node reader sent; True when it is worth a look now."""
        self.scan = scan_from_json(frame["scan"])
        self.offset = int(frame["offset"])
        if "tail" in frame:
            self.tail = [str(line) for line in frame["tail"]][-TAIL_LINES:]
        self.final = self.final or bool(frame.get("exited"))
        self.settled = self.settled or bool(frame.get("settled"))
        if self.scan.verdict is Verdict.FAILED:
            self.on_failed()
        return bool(frame.get("urgent"))

    def feed(self, chunk: bytes) -> bool:
        """Classify log bytes here (raw mode); True when they changed the phase or brought
        the ready line."""
        self.offset += len(chunk)
        self.raw_offset += len(chunk)
        events = self.scanner.feed(chunk)
        self.scan = self.scanner.state
        lines = chunk.decode("utf-8", "replace").replace("\r", "\n").splitlines()
        self.tail = [*self.tail, *(ln for ln in lines if ln.strip())][-TAIL_LINES:]
        if self.scan.verdict is Verdict.FAILED:
            self.on_failed()
        return any(e.kind in {EventKind.PHASE, EventKind.READY} for e in events)

    def finish(self) -> None:
        """End of the log in raw mode: the trailing unterminated line counts too."""
        if not self.node_side:
            self.scanner.finish()
            self.scan = self.scanner.state


def read_once(
    node: Node, run: RunMeta, look: dict[str, Any], timeout_s: float = 60.0
) -> tuple[ScanState, Probe | None] | None:
    """The whole log classified on the node as it is now, and the node's look at its end, in
    one round trip that carries states, not log (`fab status`). None when the node cannot run
    the reader: the caller reads the log itself."""
    nonce = new_nonce()
    parser = FrameParser(nonce)
    options = {**reader_options(run, look), "once": True}
    last: dict[str, Any] | None = None
    deadline = time.monotonic() + timeout_s
    for chunk in node.stream(reader_argv(options, nonce, ["true"]), timeout_s=timeout_s):
        states, _raw = parser.feed(chunk)
        last = states[-1] if states else last
        if time.monotonic() > deadline:
            raise CommandTimeoutError(f"{node.name}: reading the log took over {timeout_s:g} s")
    if parser.mode != "node" or last is None:
        return None
    return scan_from_json(last["scan"]), _probe(last.get("probe"))
