"""Showing waits: live lines on a terminal, plain lines elsewhere, and --follow.

One `Board` per command owns stderr. On a terminal it keeps one live line per host at the
bottom (phase, bar, time in phase, time since the log last grew, signals), redrawn in place,
with history (phase changes, messages) scrolling above it. Off a terminal (CI, runbooks,
pipes) it prints one plain line per phase or signal change, and each message, so logs stay
short and greppable. Hosts run in threads; the board serializes their writes.
"""

from __future__ import annotations

import sys
import threading
from typing import TextIO

from firedup.config.secrets import mask
from firedup.readiness.report import progress_key, progress_text
from firedup.readiness.watch import WaitStatus

CLEAR = "\x1b[2K"


class Board:
    def __init__(self, hosts: list[str], *, follow: bool = False, out: TextIO | None = None):
        self.hosts = hosts
        self.follow = follow
        self.out = out or sys.stderr
        # --follow writes log lines to stdout; a redrawn block would tear through them.
        self.live = self.out.isatty() and not follow
        self.lines: dict[str, str] = {}
        self.keys: dict[str, object] = {}
        self.drawn = 0
        self.lock = threading.Lock()

    def view(self, host: str) -> HostView:
        return HostView(self, host)

    def _erase(self) -> None:
        if self.drawn:
            self.out.write(f"\x1b[{self.drawn}F")
            self.out.write("".join(f"{CLEAR}\n" for _ in range(self.drawn)))
            self.out.write(f"\x1b[{self.drawn}F")
            self.drawn = 0

    def _draw(self) -> None:
        shown = [self.lines[h] for h in self.hosts if h in self.lines]
        for line in shown:
            self.out.write(f"{CLEAR}{line}\n")
        self.drawn = len(shown)

    def _emit(self, text: str) -> None:
        """A line that stays (history): above the live block, or plain."""
        if self.live:
            self._erase()
            self.out.write(f"{text}\n")
            self._draw()
        else:
            self.out.write(f"{text}\n")
        self.out.flush()

    def status(self, host: str, status: WaitStatus) -> None:
        line = mask(f"[{host}] {progress_text(status)}")
        key = progress_key(status)
        with self.lock:
            changed = self.keys.get(host) != key
            self.keys[host] = key
            if self.live:
                if changed and host in self.lines:
                    self._emit(self.lines[host])  # the old phase's last line stays as history
                self.lines[host] = line
                self._erase()
                self._draw()
                self.out.flush()
            elif changed:
                self._emit(line)
            if status.warning is not None:
                self._emit(mask(f"[{host}] WARNING {status.warning.text()}"))

    def message(self, host: str, text: str) -> None:
        with self.lock:
            self._emit(mask(f"[{host}] {text}"))

    def log(self, host: str, chunk: bytes) -> None:
        if not self.follow:
            return
        text = mask(chunk.decode("utf-8", "replace").replace("\r", "\n"))
        if len(self.hosts) > 1:
            text = "".join(f"[{host}] {ln}\n" for ln in text.splitlines())
        with self.lock:
            sys.stdout.write(text)
            sys.stdout.flush()

    def close(self) -> None:
        """Leave the last live lines on screen as history."""
        with self.lock:
            self.lines.clear()
            self.drawn = 0
            self.out.flush()


class HostView:
    """One host's handle on the board: what the core's callbacks are bound to."""

    def __init__(self, board: Board, host: str) -> None:
        self.board = board
        self.host = host

    def status(self, status: WaitStatus) -> None:
        self.board.status(self.host, status)

    def message(self, text: str) -> None:
        self.board.message(self.host, text)

    def log(self, chunk: bytes) -> None:
        self.board.log(self.host, chunk)
