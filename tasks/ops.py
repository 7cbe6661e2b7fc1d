"""Day-2 tasks: status, stop, logs."""

from __future__ import annotations

import sys

from fabric import task
from invoke.context import Context

from firedup.errors import DeployError, StartError
from firedup.report import signals_text, table
from firedup.runs import current_run, run_by_id, stop_run, tail_log
from firedup.status import HostStatus, host_status
from tasks.common import (
    HOST_HELP,
    INVENTORY_HELP,
    connect,
    get_inventory,
    per_host,
    progress,
    reporting,
    require_host,
    say,
)


def _row(name: str, result: HostStatus | DeployError) -> list[str]:
    if isinstance(result, DeployError):
        return [name, "-", "-", "-", "-", "unreachable", "-", str(result.message)]
    run, scan = result.run, result.scan
    if run is None or scan is None or result.signals is None:
        return [name, "-", "-", "-", "-", result.state.value, "-", ""]
    state = result.state.value
    if scan.reason is not None:
        state += f" ({scan.reason.value})"
    return [
        name,
        run.run_id,
        run.engine.value,
        str(run.port),
        str(run.pid or "-"),
        state,
        scan.phase.value,
        signals_text(result.signals),
    ]


@task(help={"host": "host, group or comma list (default: every host)", "inventory": INVENTORY_HELP})
def status(c: Context, host: str | None = None, inventory: str | None = None) -> None:
    """What runs where: run, phase, each readiness signal, per host."""
    with reporting():
        inv = get_inventory(c, inventory)
        names = [spec.name for spec in inv.select(host)]

        def one(name: str) -> HostStatus:
            node = connect(c, inv, name)
            try:
                return host_status(node, inv.host(name))
            finally:
                node.close()

        results = per_host(names, one)
        headers = ["HOST", "RUN", "ENGINE", "PORT", "PID", "STATE", "PHASE", "SIGNALS"]
        say(table(headers, [_row(n, r) for n, r in results.items()]))
        if any(isinstance(r, DeployError) for r in results.values()):
            sys.exit(3)


@task(
    help={
        "host": HOST_HELP,
        "inventory": INVENTORY_HELP,
        "grace": "seconds between TERM and KILL (default 20)",
    }
)
def stop(
    c: Context, host: str | None = None, inventory: str | None = None, grace: int = 20
) -> None:
    """Stop the current run: TERM its process group, KILL after a grace period."""
    with reporting():
        name = require_host("stop", host)
        inv = get_inventory(c, inventory)
        node = connect(c, inv, name)
        try:
            run = current_run(node, inv.host(name))
            if run is None:
                say(f"{name}: nothing was started here")
                return
            progress(name)(f"stopping run {run.run_id} (pid {run.pid})")
            report = stop_run(node, run, grace_s=int(grace))
        finally:
            node.close()
        if report.left:
            raise StartError(f"{name}: processes {report.left} of run {run.run_id} survived KILL")
        extra = f"; KILLed {len(report.killed)} that ignored TERM" if report.killed else ""
        say(f"{name}: run {run.run_id} {report.state}{extra}")


@task(
    help={
        "host": HOST_HELP,
        "inventory": INVENTORY_HELP,
        "lines": "how many lines from the end (default 50)",
        "run": "run id (default: the current run)",
    }
)
def logs(
    c: Context,
    host: str | None = None,
    inventory: str | None = None,
    lines: int = 50,
    run: str | None = None,
) -> None:
    """Print the tail of the current run's server log."""
    with reporting():
        name = require_host("logs", host)
        inv = get_inventory(c, inventory)
        spec = inv.host(name)
        node = connect(c, inv, name)
        try:
            meta = run_by_id(node, spec, run) if run else current_run(node, spec)
            if meta is None:
                say(f"{name}: nothing was started here")
                return
            data = tail_log(node, meta, int(lines))
        finally:
            node.close()
        sys.stdout.write(data.decode("utf-8", "replace").replace("\r", "\n"))
