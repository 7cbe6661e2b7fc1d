"""The live wait display on a terminal (rich Live), redrawn on a clock.

Why rich: it owns the hard parts of a redrawn region (cursor moves that survive other output,
width and resize, NO_COLOR, hiding and restoring the cursor, stray prints placed above the
region). What is ours is what goes in it: every line is fitted to the terminal's width by
dropping the least useful fields first, so the terminal never wraps a line (a wrapped line is
what garbled the old display: `\\r` and clear only reach its last row).

One host: completed phases print once above the region with their duration; the region is one
line (phase, the engine's bar, rate and ETA, time in phase, total, how long the log has been
quiet, the signals as marks). At the end the last phase and the total with the slowest phase
close the timeline. A fleet: one row per waiting host in a table that fits the terminal
(rows past its height are counted, not drawn); a host that finishes leaves the table for a
summary line above it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TextIO

from rich.cells import cell_len
from rich.console import Console
from rich.live import Live
from rich.text import Text

from firedup.errors import DeployError
from firedup.logscan import Phase
from firedup.readiness.events import HostTracker, Kind, WaitEvent, ending, outcome_name
from firedup.readiness.timeline import Step, duration_text, summary_line
from firedup.readiness.watch import Signals

from .shown import shown

REFRESH_PER_S = 4
SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
BAR_CELLS = 16
LABEL_CELLS = 28


@dataclass(frozen=True)
class Cell:
    """One field of a line; the lowest `keep` is dropped first when the line is too wide."""

    text: str
    keep: int
    style: str = ""

    def __post_init__(self) -> None:
        # A cell may hold what the node or the log said (a bar's label, an error's first
        # line): through the output edge before rich sees it.
        object.__setattr__(self, "text", shown(self.text))


def fit(cells: list[Cell], width: int, sep: str = "  ") -> list[Cell]:
    """The cells that fit in `width` terminal cells, least useful dropped first, order kept."""
    kept = [c for c in cells if c.text]
    while kept and _width(kept, sep) > width:
        kept.remove(min(kept, key=lambda c: c.keep))
    return kept


def _width(cells: list[Cell], sep: str) -> int:
    return sum(cell_len(c.text) for c in cells) + cell_len(sep) * max(0, len(cells) - 1)


def line(cells: list[Cell], width: int, sep: str = "  ") -> Text:
    text = Text(no_wrap=True, overflow="crop")
    for index, cell in enumerate(fit(cells, width, sep)):
        if index:
            text.append(sep)
        text.append(cell.text, style=cell.style)
    text.truncate(width, overflow="crop")
    return text


def middle_crop(text: str, width: int) -> str:
    """One row: a message too long for the terminal keeps its start (what happened) and its
    end (a path's file name), not a folded second row. Plain and --json keep it whole."""
    if cell_len(text) <= width:
        return text
    head = max(1, width * 2 // 5)
    tail = max(0, width - head - 1)
    return text[:head] + "…" + (text[-tail:] if tail else "")


def signal_marks(signals: Signals | None) -> str:
    if signals is None:
        return ""
    health = "–" if signals.health is None else str(signals.health or "none")

    def mark(ok: bool) -> str:
        return "✓" if ok else "✗"

    text = (
        f"alive{mark(signals.alive)} line{mark(signals.log_ready)} "
        f"port{mark(signals.listening)} health {health}"
    )
    return text + (" NOT-OURS-ON-PORT" if signals.foreign_listeners else "")


def bar_graphic(done: int, total: int) -> str:
    filled = round(BAR_CELLS * done / total) if total else 0
    return "━" * filled + "─" * (BAR_CELLS - filled)


def _short(label: str) -> str:
    return label if len(label) <= LABEL_CELLS else label[: LABEL_CELLS - 1] + "…"


def host_cells(tracker: HostTracker, frame: int, *, with_host: bool) -> list[Cell]:
    """One host's live fields, each with how much it is worth keeping on a narrow terminal.
    Always the same fields in the same order (empty when unknown), so rows align as columns."""
    spin = SPINNER[frame % len(SPINNER)]
    cells = [Cell(tracker.host, 100, "bold")] if with_host else []
    if not tracker.waiting:
        return [*cells, Cell(f"{spin} preparing", 99, "cyan")]
    phase = tracker.phases.phase or Phase.LAUNCHING
    bar = tracker.bar
    rate = " ".join(p for p in (bar.rate, f"eta {bar.eta}" if bar.eta else "") if p) if bar else ""
    return [
        *cells,
        Cell(f"{spin} {phase.value}", 99, "cyan"),
        Cell(_short(bar.label) if bar else "", 10, "dim"),
        Cell(bar_graphic(bar.done, bar.total) if bar else "", 20, "magenta"),
        Cell(f"{bar.done}/{bar.total}" if bar else "", 90, "bold"),
        Cell(rate, 30),
        Cell(f"{duration_text(tracker.in_phase_s())} in phase", 80),
        Cell(f"total {duration_text(tracker.elapsed_s())}", 50),
        Cell(f"log quiet {duration_text(tracker.quiet_s())}", 45, "dim"),
        Cell(signal_marks(tracker.signals), 60),
    ]


def step_line(step: Step, width: int, name_cells: int, *, ended: str = "") -> Text:
    """A completed phase; `ended` names how the last one ended when it was not a success."""
    mark, style = ("✓", "green") if not ended else ("✗", "red")
    if ended == "interrupted":
        mark, style = "■", "yellow"
    cells = [
        Cell(f"  {mark} {step.phase.value.ljust(name_cells)}", 100, style),
        Cell(duration_text(step.duration_s), 90),
        Cell(ended + (" here" if ended == "failed" else ""), 50, style),
    ]
    return line(cells, width)


class LiveScreen:
    """The rich Live region and the history printed above it."""

    def __init__(self, hosts: list[str], trackers: dict[str, HostTracker], out: TextIO) -> None:
        self.hosts = hosts
        self.trackers = trackers
        self.fleet = len(hosts) > 1
        self.printed_steps = dict.fromkeys(hosts, 0)
        self.summed: set[str] = set()
        self.frame = 0
        # highlight off: our text is not code; NO_COLOR and resizes are rich's to honour.
        self.console = Console(file=out, highlight=False, soft_wrap=False)
        self.live = Live(
            console=self.console,
            get_renderable=self._render,
            refresh_per_second=REFRESH_PER_S,
            transient=True,
            redirect_stdout=True,
            redirect_stderr=True,
        )
        self.live.start()

    def _print(self, text: Text | str) -> None:
        if isinstance(text, str):
            text = Text(middle_crop(shown(text), self.console.width - 1), no_wrap=True)
        self.console.print(text, soft_wrap=False)

    def events(self, host: str, events: list[WaitEvent]) -> None:
        for event in events:
            if event.kind is Kind.MESSAGE or event.kind is Kind.RECONNECT:
                self._print(f"[{host}] {event.data['text']}")
            elif event.kind is Kind.STALL:
                self._print(
                    f"[{host}] WARNING no progress in {event.data['phase']}: {event.data['hint']}"
                )
        if self.fleet:
            if any(e.kind is Kind.VERDICT for e in events):
                self._summary(host)
        else:
            self._steps(host)

    def _steps(self, host: str) -> None:
        """Completed phases, once each; at the end the last one and the total."""
        tracker = self.trackers[host]
        steps = tracker.timeline().steps
        done = tracker.result is not None
        closed = [s for s in steps if not s.open]  # ready closes warmup before the verdict
        width = self.console.width - 1
        name_cells = max(len(p.value) for p in Phase)
        ended = ending(tracker.result)
        for index in range(self.printed_steps[host], len(closed)):
            last = index == len(closed) - 1
            self._print(step_line(closed[index], width, name_cells, ended=ended if last else ""))
        self.printed_steps[host] = len(closed)
        ready = tracker.phases.phase is Phase.READY  # the timeline is complete: say it now
        if (done or ready) and tracker.waiting and host not in self.summed:
            self.summed.add(host)
            self._print(Text(summary_line(tracker.timeline()), no_wrap=True, overflow="ellipsis"))

    def _summary(self, host: str) -> None:
        """A fleet host that finished: one line above the table, which drops its row."""
        tracker = self.trackers[host]
        timeline = tracker.timeline()
        slowest = timeline.slowest
        result = tracker.result
        if isinstance(result, DeployError):
            first = result.message.splitlines()[0].removeprefix(f"{host}: ")
            word = outcome_name(result)
            mark, style = ("■", "yellow") if word == "interrupted" else ("✗", "red")
            cells = [Cell(f"{mark} {host}", 100, style), Cell(word.upper(), 99, style)]
            cells.append(Cell(first, 40))
        else:
            cells = [Cell(f"✓ {host}", 100, "green"), Cell("READY", 99, "green")]
        cells += [
            Cell(f"after {duration_text(timeline.total_s)}", 80)
            if tracker.waiting
            else Cell("", 0),
            Cell(f"slowest {slowest.phase.value} {duration_text(slowest.duration_s)}", 60)
            if slowest
            else Cell("", 0),
        ]
        self._print(line(cells, self.console.width - 1))

    def _render(self) -> Text:
        """Called by rich on its clock (4/s) and after each print: never takes the board lock."""
        self.frame += 1
        width = self.console.width - 1  # the last column can make some terminals wrap
        if not self.fleet:
            return line(
                host_cells(self.trackers[self.hosts[0]], self.frame, with_host=False), width
            )
        lines = fleet_lines(self.hosts, self.trackers, self.frame, width, self.console.height)
        return Text("\n", no_wrap=True).join(lines)

    def close(self) -> None:
        self.live.stop()


def fleet_lines(
    hosts: list[str], trackers: dict[str, HostTracker], frame: int, width: int, height: int
) -> list[Text]:
    """The fleet table: a count line, one row per waiting host, and the rows that do not fit
    the terminal's height counted by phase on one last line."""
    waiting = [trackers[h] for h in hosts if trackers[h].result is None]
    failed = sum(isinstance(t.result, DeployError) for t in trackers.values())
    ready = len(hosts) - len(waiting) - failed
    head = f"{len(waiting)} waiting, {ready} ready, {failed} failed of {len(hosts)} hosts"
    room = max(1, height - 3)
    drawn = waiting if len(waiting) <= room else waiting[: room - 1]
    rows = [host_cells(t, frame, with_host=True) for t in drawn]
    lines = [line([Cell(head, 100, "bold")], width), *_columns(rows, width)]
    if len(drawn) < len(waiting):
        counts: dict[str, int] = {}
        for t in waiting[len(drawn) :]:
            name = (t.phases.phase or Phase.LAUNCHING).value if t.waiting else "preparing"
            counts[name] = counts.get(name, 0) + 1
        detail = ", ".join(f"{n} {name}" for name, n in counts.items())
        more = f"… {len(waiting) - len(drawn)} more: {detail}"
        lines.append(line([Cell(more, 100, "dim")], width))
    return lines


def _columns(rows: list[list[Cell]], width: int) -> list[Text]:
    """Rows of cells as aligned columns; whole columns go, least useful first, to fit."""
    if not rows:
        return []
    columns = max(len(r) for r in rows)
    grid = [r + [Cell("", 0)] * (columns - len(r)) for r in rows]
    keep = [max(row[i].keep for row in grid) for i in range(columns)]
    alive = list(range(columns))

    def total() -> int:
        sizes = [max(cell_len(row[i].text) for row in grid) for i in alive]
        return sum(sizes) + 2 * max(0, len(alive) - 1)

    while len(alive) > 1 and total() > width:
        alive.remove(min(alive, key=lambda i: keep[i]))
    sizes = {i: max(cell_len(row[i].text) for row in grid) for i in alive}
    out = []
    for row in grid:
        text = Text(no_wrap=True, overflow="crop")
        for n, i in enumerate(alive):
            if n:
                text.append("  ")
            pad = sizes[i] - cell_len(row[i].text)
            text.append(row[i].text + " " * pad, style=row[i].style)
        text.rstrip()
        text.truncate(width, overflow="crop")
        out.append(text)
    return out
