"""Showing waits: a live display on a terminal, plain lines elsewhere, JSON for programs.

One `Board` per command owns the output of a wait. Each host's core hooks feed a
`HostTracker` (firedup.events), which turns them into events; the board renders them one of
three ways:
- live (stderr is a terminal): a redrawn display built on rich (tasks/live.py, imported only
  then, so `fab --list` and `fab status` start fast);
- plain (off a terminal, `--plain`, `--follow`, TERM=dumb): one line per phase or signal
  change and each message, short and greppable for CI and runbooks;
- json (`--json`): one JSON object per event on stdout (docs/events.md), nothing else there.
Hosts run in threads; the board serializes their writes.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, TextIO

from firedup.errors import DeployError, UsageError
from firedup.launch.runs import RunMeta
from firedup.logscan import ScanState
from firedup.readiness.events import HostTracker, WaitEvent, ending
from firedup.readiness.report import change_text, progress_key
from firedup.readiness.timeline import inline_text
from firedup.readiness.watch import WaitStatus

from .shown import log_text, shown

if TYPE_CHECKING:
    from .live import LiveScreen


class Mode(StrEnum):
    LIVE = "live"
    PLAIN = "plain"
    JSON = "json"


def choose_mode(*, json_out: bool, plain: bool, follow: bool, out: TextIO) -> Mode:
    """JSON when asked; live only on a real, capable terminal and when nothing else writes."""
    if json_out:
        return Mode.JSON
    if plain or follow or not out.isatty():
        return Mode.PLAIN
    if os.environ.get("TERM", "") in {"", "dumb", "unknown"}:
        return Mode.PLAIN
    return Mode.LIVE


@dataclass(frozen=True)
class Output:
    """How a fleet command shows its wait: --follow, --json, --plain."""

    follow: bool = False
    json: bool = False
    plain: bool = False

    def mode(self) -> Mode:
        if self.json and self.follow:
            raise UsageError("--json and --follow do not mix: the log would break the JSON")
        return choose_mode(json_out=self.json, plain=self.plain, follow=self.follow, out=sys.stderr)


class Board:
    def __init__(
        self,
        hosts: list[str],
        *,
        follow: bool = False,
        mode: Mode | None = None,
        out: TextIO | None = None,
    ) -> None:
        self.hosts = hosts
        self.follow = follow
        self.out = out or sys.stderr
        self.mode = mode or choose_mode(json_out=False, plain=False, follow=follow, out=self.out)
        self.trackers = {host: HostTracker(host) for host in hosts}
        self.lock = threading.Lock()
        self.plain_keys: dict[str, object] = {}
        self.closed = False
        self.screen: LiveScreen | None = None
        if self.mode is Mode.LIVE:
            from .live import LiveScreen  # rich, only when a display is shown

            self.screen = LiveScreen(hosts, self.trackers, self.out)

    def view(self, host: str) -> HostView:
        return HostView(self, host)

    def _write(self, host: str, events: list[WaitEvent], plain: list[str] | None = None) -> None:
        """Hand events to the renderer of this mode (called under the board's lock)."""
        if self.closed:
            return  # a host thread still running after Ctrl-C: the command has said its last
        if self.mode is Mode.JSON:
            for event in events:
                sys.stdout.write(shown(json.dumps(event.to_json(), ensure_ascii=False)) + "\n")
            sys.stdout.flush()
        elif self.screen is not None:
            self.screen.events(host, events)
        elif plain:
            self.out.write("".join(shown(line) + "\n" for line in plain))
            self.out.flush()

    def started(self, host: str, run: RunMeta) -> None:
        with self.lock:
            self._write(host, self.trackers[host].started(run))

    def scan(self, host: str, scan: ScanState) -> None:
        with self.lock:
            self._write(host, self.trackers[host].scan(scan))

    def status(self, host: str, status: WaitStatus) -> None:
        with self.lock:
            events = self.trackers[host].status(status)
            plain = []
            key = progress_key(status)
            if self.plain_keys.get(host) != key:
                self.plain_keys[host] = key
                plain.append(f"[{host}] {change_text(status)}")  # at a change: no 0s timers
            if status.warning is not None:
                plain.append(f"[{host}] WARNING {status.warning.text()}")
            self._write(host, events, plain)

    def message(self, host: str, text: str) -> None:
        with self.lock:
            self._write(host, self.trackers[host].message(text), [f"[{host}] {text}"])

    def reconnect(self, host: str, text: str) -> None:
        with self.lock:
            self._write(host, self.trackers[host].reconnect(text), [f"[{host}] {text}"])

    def finish(self, host: str, result: WaitStatus | DeployError) -> None:
        """A host's wait ended: its verdict and timeline (a fleet's live table drops its row)."""
        with self.lock:
            tracker = self.trackers[host]
            events = tracker.finish(result)
            plain = []
            if tracker.waiting:
                text = inline_text(tracker.timeline(), ended=ending(result))
                plain.append(f"[{host}] timeline: {text}")
            self._write(host, events, plain)

    def watch(self, host: str, work: Callable[[], WaitStatus]) -> WaitStatus:
        """Run one host's work; its verdict and timeline go out the moment it ends."""
        try:
            status = work()
        except DeployError as exc:
            self.finish(host, exc)
            raise
        self.finish(host, status)
        return status

    def interrupted(self, error: DeployError) -> None:
        """Ctrl-C: every host still waiting ends with `error` (the servers keep running)."""
        for host in self.hosts:
            if self.trackers[host].result is None:
                self.finish(host, error)

    def log(self, host: str, chunk: bytes) -> None:
        if not self.follow or self.closed:
            return
        text = log_text(chunk)
        if len(self.hosts) > 1:
            text = "".join(f"[{host}] {ln}\n" for ln in text.splitlines())
        with self.lock:
            sys.stdout.write(text)
            sys.stdout.flush()

    def close(self) -> None:
        """End the live display (the terminal is left clean: cursor shown, region settled)."""
        with self.lock:
            self.closed = True
            if self.screen is not None:
                self.screen.close()
                self.screen = None
            self.out.flush()


class HostView:
    """One host's handle on the board: what the core's callbacks are bound to."""

    def __init__(self, board: Board, host: str) -> None:
        self.board = board
        self.host = host

    def started(self, run: RunMeta) -> None:
        self.board.started(self.host, run)

    def scan(self, scan: ScanState) -> None:
        self.board.scan(self.host, scan)

    def status(self, status: WaitStatus) -> None:
        self.board.status(self.host, status)

    def message(self, text: str) -> None:
        self.board.message(self.host, text)

    def reconnect(self, text: str) -> None:
        self.board.reconnect(self.host, text)

    def log(self, chunk: bytes) -> None:
        self.board.log(self.host, chunk)
