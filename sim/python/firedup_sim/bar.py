"""tqdm look-alike: each refresh is '\\r' + the bar, no newline until close (tqdm to a file)."""

from __future__ import annotations

import sys
import time

_BLOCKS = " ▏▎▍▌▋▊▉█"


def _fmt_time(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours:d}:{minutes:02d}:{secs:02d}" if hours else f"{minutes:02d}:{secs:02d}"


def _bar(frac: float, width: int = 10) -> str:
    cells = frac * width
    full = int(cells)
    part = int((cells - full) * 8)
    text = "█" * full + (_BLOCKS[part] if full < width else "")
    return text.ljust(width)


class Bar:
    """`style` is "tqdm" (default l_bar/bar/r_bar) or "completed" (sglang's BAR_FORMAT)."""

    def __init__(self, total: int, desc: str = "", style: str = "tqdm", enabled: bool = True):
        self.total = total
        self.desc = desc
        self.style = style
        self.enabled = enabled
        self.n = 0
        self.start = time.monotonic()
        self._refresh()

    def set_description(self, desc: str) -> None:
        self.desc = desc
        self._refresh()

    def update(self, n: int = 1) -> None:
        self.n += n
        self._refresh()

    def close(self) -> None:
        if self.enabled and self.style == "tqdm":
            sys.stderr.write("\n")
            sys.stderr.flush()

    def _rates(self) -> tuple[str, str, str]:
        elapsed = time.monotonic() - self.start
        if self.n == 0 or elapsed <= 0:
            return _fmt_time(elapsed), "?", "?it/s"
        rate = self.n / elapsed
        remaining = _fmt_time((self.total - self.n) / rate)
        rate_fmt = f"{rate:.2f}it/s" if rate >= 1 else f"{1 / rate:.2f}s/it"
        return _fmt_time(elapsed), remaining, rate_fmt

    def render(self) -> str:
        elapsed, remaining, rate = self._rates()
        pct = 100 * self.n / self.total if self.total else 100
        tail = f"{self.n}/{self.total} [{elapsed}<{remaining}, {rate}]"
        lead = f"{self.desc}: " if self.desc else ""
        if self.style == "completed":
            # sglang BAR_FORMAT ends with "\n" (srt/utils/common.py): each refresh is a line.
            return f"{lead}{pct:3.0f}% Completed | {tail}\n"
        return f"{lead}{pct:3.0f}%|{_bar(pct / 100)}| {tail}"

    def _refresh(self) -> None:
        if self.enabled:
            sys.stderr.write("\r" + self.render())
            sys.stderr.flush()
