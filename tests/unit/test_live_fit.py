"""The live display's lines fit the terminal: never wider than it (a wrapped line is what
garbled the old display), the least useful fields dropped first, 64 hosts in a fleet table
that fits the terminal's height."""

from __future__ import annotations

from datetime import UTC, datetime

from rich.cells import cell_len

from firedup.config.inventory import Engine
from firedup.errors import ServerCrashedError
from firedup.logscan import LogScanner
from firedup.readiness.events import HostTracker
from firedup.readiness.watch import Signals
from tasks.live import Cell, fit, fleet_lines, host_cells, line

CAPTURE = (
    b"[2026-01-01 00:00:00 TP0] Capture cuda graph begin. This can take up to several minutes.\n"
    b"Capturing batches (bs=48 avail_mem=14.04 GB):  52%|#####     | 12/23 [00:03<00:02, 4.61it/s]"
)


class Clock:
    now = 50.0

    def __call__(self) -> float:
        return self.now


def capturing(host: str = "gpu-node", clock: Clock | None = None) -> HostTracker:
    tracker = HostTracker(host, clock=clock or Clock(), wall=lambda: datetime.now(UTC))
    scanner = LogScanner(engine=Engine.SGLANG)
    scanner.feed(CAPTURE)
    tracker.scan(scanner.state)
    tracker.signals = Signals(alive=True, log_ready=False, listening=False)
    return tracker


def test_fit_drops_the_least_useful_field_first_and_keeps_order() -> None:
    cells = [Cell("phase", 99), Cell("label-label", 10), Cell("12/23", 90), Cell("3s", 80)]
    assert [c.text for c in fit(cells, 100)] == ["phase", "label-label", "12/23", "3s"]
    assert [c.text for c in fit(cells, 20)] == ["phase", "12/23", "3s"]
    assert [c.text for c in fit(cells, 12)] == ["phase", "12/23"]


def test_a_host_line_never_exceeds_the_width_at_any_width() -> None:
    tracker = capturing()
    for width in range(10, 260):
        text = line(host_cells(tracker, 3, with_host=False), width)
        assert cell_len(text.plain) <= width, (width, text.plain)


def test_what_a_narrow_and_a_wide_terminal_keep() -> None:
    tracker = capturing()
    narrow = line(host_cells(tracker, 0, with_host=False), 79).plain
    wide = line(host_cells(tracker, 0, with_host=False), 199).plain
    for text in (narrow, wide):
        assert "cuda_graph" in text and "12/23" in text and "in phase" in text
    assert "Capturing batches" not in narrow  # the bar's label goes first
    assert "Capturing batches" in wide and "4.61it/s" in wide and "eta 00:02" in wide
    assert "alive✓" in wide and "port✗" in wide


def test_sixty_four_hosts_fit_the_terminal_finished_ones_leave_the_table() -> None:
    clock = Clock()
    hosts = [f"gpu-node-{i:02d}" for i in range(64)]
    trackers = {h: capturing(h, clock) for h in hosts}
    trackers[hosts[0]].finish(ServerCrashedError("gpu-node-00: oom", reason="oom"))
    for width, height in ((80, 24), (200, 50)):
        lines = fleet_lines(hosts, trackers, 0, width - 1, height)
        assert len(lines) <= height - 1
        assert all(cell_len(t.plain) <= width - 1 for t in lines)
        assert lines[0].plain.startswith("63 waiting, 0 ready, 1 failed of 64 hosts")
        assert "gpu-node-00" not in "\n".join(t.plain for t in lines)
        assert lines[-1].plain.startswith("… ") and "cuda_graph" in lines[-1].plain
        rows = [t.plain for t in lines[1:-1]]
        assert len({r.index("12/23") for r in rows}) == 1  # aligned columns
