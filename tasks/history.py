"""`fab history`: what was done to a node, by whom, and how it ended."""

from __future__ import annotations

import json

from invoke.context import Context

from firedup.ops.history import HistoryRecord, read_history
from firedup.readiness.report import table

from .common import (
    HOST_HELP,
    INVENTORY_HELP,
    connected,
    get_inventory,
    reporting,
    require_host,
    say,
    task,
    whole,
)

HEADERS = ["WHEN (UTC)", "ACTION", "RUN", "OUTCOME", "WHO", "ENGINE", "COMMIT", "SCRIPT", "REASON"]


def image_text(record: HistoryRecord) -> str:
    """The image a container run ran, with the start of the runtime's id for it."""
    if not record.image:
        return "-"
    short = record.image_id.removeprefix("sha256:")[:12]
    return f"{record.image} ({short})" if short else record.image


def history_row(record: HistoryRecord) -> list[str]:
    engine = " ".join(p for p in (record.engine, record.engine_version) if p)
    reason = "; ".join(
        p for p in (record.reason.splitlines()[0] if record.reason else "", record.detail) if p
    )
    return [
        f"{record.at:%Y-%m-%d %H:%M:%S}",
        record.action.value,
        record.run_id or "-",
        record.outcome.value,
        record.who,
        engine or "-",
        record.repo_commit[:12] + ("+dirty" if record.repo_commit.endswith("+dirty") else ""),
        record.script_sha256[:12] or "-",
        reason[:80],
    ]


@task(
    help={
        "host": HOST_HELP,
        "inventory": INVENTORY_HELP,
        "lines": "how many of the most recent records (default 20)",
        "json": "print the records as a JSON array (the format in docs/history.md)",
    }
)
def history(
    c: Context,
    host: str | None = None,
    inventory: str | None = None,
    lines: str | None = None,
    json_: bool = False,
) -> None:
    """Who deployed, stopped or patched what on a node, and how it ended."""
    with reporting():
        count = whole("lines", lines, 20, minimum=1)
        name = require_host("history", host)
        inv = get_inventory(c, inventory)
        with connected(c, inv, name) as node:
            records = read_history(node, inv.host(name), count)
        if json_:
            say(json.dumps([r.to_json() for r in records], indent=2))
        elif not records:
            say(f"{name}: no history yet")
        elif any(r.image for r in records):  # containers: which image each run ran
            rows = [[*history_row(r)[:6], image_text(r), *history_row(r)[6:]] for r in records]
            say(table([*HEADERS[:6], "IMAGE", *HEADERS[6:]], rows))
        else:
            say(table(HEADERS, [history_row(r) for r in records]))
