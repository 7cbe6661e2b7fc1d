"""Showing a wait: a live line on a terminal, plain lines elsewhere, and --follow.

On a terminal the line for a host is redrawn in place (phase, bar, time in phase, time since
the log last grew, signals). Off a terminal (CI, runbooks, pipes) one plain line is printed per
phase change or signal change, and once per stall warning, so logs stay short and greppable.
"""

from __future__ import annotations

import sys
from typing import TextIO

from firedup.readiness import WaitStatus
from firedup.report import progress_key, progress_text
from firedup.secrets import mask


class WaitDisplay:
    def __init__(self, host: str, *, follow: bool = False, stream: TextIO | None = None) -> None:
        self.host = host
        self.follow = follow
        self.out = stream or sys.stderr
        # --follow writes log lines to stdout; a redrawn line would tear through them.
        self.live = self.out.isatty() and not follow
        self.last_key: object = None
        self.drawn = False

    def status(self, status: WaitStatus) -> None:
        line = mask(f"[{self.host}] {progress_text(status)}")
        key = progress_key(status)
        if self.live:
            newline = key != self.last_key and self.drawn
            self.out.write(("\n" if newline else "\r\x1b[2K") + line)
            self.drawn = True
        elif key != self.last_key:
            self.out.write(line + "\n")
        self.last_key = key
        if status.warning is not None:
            self.message(f"WARNING {status.warning.text()}")
        self.out.flush()

    def message(self, text: str) -> None:
        self.end_line()
        self.out.write(mask(f"[{self.host}] {text}") + "\n")
        self.out.flush()

    def log(self, chunk: bytes) -> None:
        if self.follow:
            sys.stdout.write(mask(chunk.decode("utf-8", "replace").replace("\r", "\n")))
            sys.stdout.flush()

    def end_line(self) -> None:
        if self.live and self.drawn:
            self.out.write("\n")
            self.drawn = False
