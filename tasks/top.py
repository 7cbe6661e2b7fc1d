"""`fab top`: a live table of the fleet serving (or starting), one row per host (docs/top.md)."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable
from json import dumps
from typing import TYPE_CHECKING

from invoke.context import Context

from firedup.errors import DeployError
from firedup.node.base import Node
from firedup.ops.top import TopHost, TopRow, fleet_rows

from .common import (
    INVENTORY_HELP,
    MAX_PARALLEL_HELP,
    connect,
    get_inventory,
    limit_connecting,
    number,
    per_host,
    reporting,
    say,
    task,
)
from .shown import shown

if TYPE_CHECKING:  # rich is loaded by `fab top` only: `fab --list` stays fast
    from rich.console import Console
    from rich.table import Table

INTERVAL_S = 2.0


def _num(value: float | None, fmt: str = "{:.0f}") -> str:
    return "-" if value is None else fmt.format(value)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1000:.0f}"


def _pair(a: str, b: str) -> str:
    return "-" if a == b == "-" else f"{a}/{b}"


def _phase(row: TopRow) -> str:
    from .live import bar_graphic

    if row.error:
        return row.error
    text = row.phase or "-"
    if row.progress is not None and row.progress.total:
        bar = row.progress
        text += f" {bar_graphic(bar.done, bar.total)[:10]} {bar.done}/{bar.total}"
    if row.eta_s is not None:
        text += f" eta {row.eta_s:.0f}s"
    return text


def _gpu(m: dict[str, float | None]) -> str:
    used, total = m.get("gpu_mem_used_mib"), m.get("gpu_mem_total_mib")
    mem = f"{100 * used / total:.0f}%" if used is not None and total else "-"
    return _pair(_num(m.get("gpu_util_pct")), mem)


# (header, cell, priority): the lowest priorities are left out first when the width is short.
COLUMNS: list[tuple[str, Callable[[TopRow], str], int]] = [
    ("HOST", lambda r: r.host, 0),
    ("STATE", lambda r: r.state, 0),
    ("PHASE", _phase, 1),
    ("REQ r/w", lambda r: _pair(_num(r.metrics.get("requests_running")),
                                _num(r.metrics.get("requests_waiting"))), 2),
    ("TOK/S in/out", lambda r: _pair(_num(r.metrics.get("prompt_tokens_per_s")),
                                     _num(r.metrics.get("generation_tokens_per_s"))), 2),
    ("TTFT ms p50/95", lambda r: _pair(_ms(r.metrics.get("ttft_p50_s")),
                                       _ms(r.metrics.get("ttft_p95_s"))), 3),
    ("ITL ms p50/95", lambda r: _pair(_ms(r.metrics.get("itl_p50_s")),
                                      _ms(r.metrics.get("itl_p95_s"))), 5),
    ("KV", lambda r: _num(_pct(r.metrics.get("kv_cache_usage")), "{:.0f}%"), 4),
    ("PREFIX", lambda r: _num(_pct(r.metrics.get("prefix_cache_hit_rate")), "{:.0f}%"), 6),
    ("SPEC", lambda r: _num(r.metrics.get("spec_accept_length"), "{:.2f}"), 7),
    ("GPU util/mem", lambda r: _gpu(r.metrics), 4),
]  # fmt: skip


def _pct(value: float | None) -> float | None:
    return None if value is None else 100 * value


def fit_columns(rows: list[TopRow], width: int) -> list[int]:
    """Which columns fit `width` (indices, in display order): by priority, one space between."""
    cells = [[header, *(cell(r) for r in rows)] for header, cell, _ in COLUMNS]
    widths = [max(len(c) for c in col) for col in cells]
    widths[0] = min(widths[0], 16)  # a long host name is cut, not the table
    widths[2] = min(widths[2], 36)
    chosen: list[int] = []
    used = -1
    for index in sorted(range(len(COLUMNS)), key=lambda i: COLUMNS[i][2]):
        if used + 1 + widths[index] <= width or COLUMNS[index][2] == 0:
            chosen.append(index)
            used += 1 + widths[index]
    return sorted(chosen)


def top_table(rows: list[TopRow], width: int) -> Table:
    from rich.table import Table
    from rich.text import Text  # a cell is text, never markup: host names, errors from nodes

    table = Table(box=None, padding=(0, 1, 0, 0), show_edge=False, pad_edge=False)
    chosen = fit_columns(rows, width - 1)
    for index in chosen:
        header = COLUMNS[index][0]
        limit = {0: 16, 2: 36}.get(index)
        table.add_column(header, no_wrap=True, overflow="ellipsis", max_width=limit)
    for row in rows:
        table.add_row(*(Text(shown(COLUMNS[i][1](row))) for i in chosen))
    return table


class Fleet:
    """Each host's connection, kept across refreshes, and its TopHost."""

    def __init__(self, c: Context, host: str | None, inventory: str | None) -> None:
        self.c = c
        self.inv = get_inventory(c, inventory)
        self.names = [spec.name for spec in self.inv.select(host)]
        self.tops = {
            n: TopHost(self.inv.host(n), self.inv.deployment_for(self.inv.host(n)))
            for n in self.names
        }
        self.nodes: dict[str, Node] = {}
        self.lock = threading.Lock()

    def _one(self, name: str) -> TopRow:
        node = self.nodes.get(name)
        if node is None:
            node = connect(self.c, self.inv, name)
            with self.lock:
                self.nodes[name] = node
        try:
            return self.tops[name].refresh(node)
        except DeployError:
            with self.lock:
                self.nodes.pop(name, None)
            node.close()
            raise

    def refresh(self) -> list[TopRow]:
        return fleet_rows(self.tops, per_host(self.names, self._one))

    def close(self) -> None:
        for node in self.nodes.values():
            node.close()


@task(
    help={
        "host": "host, group or comma list (default: every host)",
        "inventory": INVENTORY_HELP,
        "interval": f"seconds between refreshes (default {INTERVAL_S:g})",
        "once": "one refresh (two samples `interval` apart, for rates), printed, then exit",
        "json": "with --once: one JSON object per host and line (docs/top.schema.json)",
        "max-parallel": MAX_PARALLEL_HELP,
    }
)
def top(
    c: Context,
    host: str | None = None,
    inventory: str | None = None,
    interval: float = INTERVAL_S,
    once: bool = False,
    json: bool = False,
    max_parallel: int = 0,
) -> None:
    """A live table: state, phase, requests, tokens/s, latencies, KV and GPUs per host."""
    with reporting():
        limit_connecting(c, max_parallel)
        every = number("--interval", interval, INTERVAL_S, minimum=0.2)
        fleet = Fleet(c, host, inventory)
        try:
            if once or json:
                fleet.refresh()
                time.sleep(every)
                rows = fleet.refresh()
                if json:
                    for row in rows:
                        say(dumps(row.to_json(), sort_keys=True))
                else:
                    from rich.console import Console

                    console = Console(highlight=False)
                    console.print(top_table(rows, _width(console)))
                return
            _live(fleet, every)
        finally:
            fleet.close()


def _width(console: Console) -> int:
    """The terminal's own width, asked at each refresh: a resize takes effect, and a stale
    COLUMNS in the environment (which rich would believe) does not squeeze the table."""
    with contextlib.suppress(OSError, ValueError):
        console.width = os.get_terminal_size(sys.stdout.fileno()).columns
    return console.width


def _live(fleet: Fleet, every: float) -> None:
    from rich.console import Console
    from rich.live import Live

    console = Console(highlight=False)
    rows = fleet.refresh()
    with Live(console=console, auto_refresh=False, screen=False) as live:
        while True:
            live.update(top_table(rows, _width(console)), refresh=True)
            deadline = time.monotonic() + every
            rows = fleet.refresh()
            time.sleep(max(0.0, deadline - time.monotonic()))
