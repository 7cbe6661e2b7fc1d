"""Day-2 tasks: status, stop, logs."""

from __future__ import annotations

import sys
import time
from json import dumps

from invoke.context import Context

from firedup.errors import DeployError
from firedup.launch.gpus import GpuMemory
from firedup.launch.runs import STOP_GRACE_S, current_run, follow_argv, run_by_id, tail_log
from firedup.node.slot import slot_mates
from firedup.ops.ranks import join_ranks
from firedup.ops.shutdown import StopOutcome, stop_host
from firedup.ops.status import HostStatus, RunState, host_status
from firedup.ops.status_json import status_json
from firedup.readiness.report import signals_text, table
from firedup.readiness.timeline import from_spans, inline_text

from .common import (
    HOST_HELP,
    INVENTORY_HELP,
    MAX_PARALLEL_HELP,
    connected,
    exit_by_rule,
    get_inventory,
    limit_connecting,
    per_host,
    progress,
    reporting,
    require_host,
    say,
    task,
    whole,
)
from .shown import log_text, shown


def _row(name: str, result: HostStatus | DeployError) -> list[str]:
    if isinstance(result, DeployError):
        return [name, "-", "-", "-", "-", "unreachable", "-", str(result.message)]
    run, scan = result.run, result.scan
    if run is None or scan is None or result.signals is None:
        return [name, "-", "-", "-", "-", result.state.value, "-", ""]
    state = result.state.value
    if scan.reason is not None and result.state is RunState.FAILED:  # a stop is a stop
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


def gpus_text(gpus: tuple[GpuMemory, ...], ours: tuple[int, ...] | None) -> str:
    """The node's GPU memory, or the run's GPUs' when its meta names them."""
    if ours is not None:
        gpus = tuple(g for g in gpus if g.index in ours) or gpus
    used = sum(g.used_mib for g in gpus) / 1024
    total = sum(g.total_mib for g in gpus) / 1024
    which = f" (GPUs {','.join(map(str, ours))})" if ours is not None else ""
    return f"gpus {len(gpus)}x {used:.0f}/{total:.0f} GiB used{which}"


def _details(result: HostStatus, mates: tuple[str, ...] = ()) -> str:
    """The second line per host: whose run it is when another host entry started it, the
    host entries sharing its slot, GPUs, patches, the last deploy, serving stats, the lock."""
    parts = []
    run = result.run
    if run is not None and run.host != result.host:
        parts.append(f"runs {run.host}'s deployment {run.deployment} (same node and workdir)")
    if run is not None and run.container:
        parts.append(f"{run.runtime} container {run.container}, image {run.image or 'unknown'}")
    if mates:
        parts.append(f"one slot with {', '.join(mates)}")
    if result.gpus:
        parts.append(gpus_text(result.gpus, run.gpus if run else None))
    if result.memory:
        parts.append(result.memory.text())
    if result.patches:
        parts.append(f"patches {', '.join(result.patches)}")
    if result.last_deploy:
        last = result.last_deploy
        parts.append(
            f"last {last.action} {last.outcome}" + (f" ({last.reason})" if last.reason else "")
        )
    if result.decode:
        parts.append(f"serving {result.decode.text()}")
    if result.uptime_s is not None:
        parts.append(f"up {result.uptime_s:.0f}s")
    if result.lock:
        parts.append(f"lock {result.lock.describe()}")
    if result.watch:
        parts.append(result.watch.text(time.time()))
    if result.log_refused:
        parts.append(f"log not read: {result.log_refused}")
    if result.rank:
        parts.append(result.rank.text())
    return "; ".join(parts)


@task(
    help={
        "host": "host, group or comma list (default: every host)",
        "inventory": INVENTORY_HELP,
        "json": "print one JSON object (format: docs/status.md)",
        "max-parallel": MAX_PARALLEL_HELP,
    }
)
def status(
    c: Context,
    host: str | None = None,
    inventory: str | None = None,
    json: bool = False,
    max_parallel: int = 0,
) -> None:
    """What runs where: run, phase, each readiness signal, GPUs, patches, serving stats."""
    with reporting():
        limit_connecting(c, max_parallel)
        inv = get_inventory(c, inventory)
        names = [spec.name for spec in inv.select(host)]

        def one(name: str) -> HostStatus:
            spec = inv.host(name)
            with connected(c, inv, name) as node:
                return host_status(node, spec, inv.deployment_for(spec))

        results = per_host(names, one)
        seen = join_ranks(results)  # a multi-node deployment's ranks, read together
        mates = slot_mates(inv.hosts.values())
        if json:
            say(dumps(status_json(seen), indent=2, sort_keys=True))
        else:
            headers = ["HOST", "RUN", "ENGINE", "PORT", "PID", "STATE", "PHASE", "SIGNALS"]
            say(table(headers, [_row(n, r) for n, r in seen.items()]))
            for name, result in seen.items():
                if not isinstance(result, DeployError) and _details(result, mates[name]):
                    say(f"  {name}: {_details(result, mates[name])}")
                if not isinstance(result, DeployError) and result.scan is not None:
                    say(f"  {name}: timeline {inline_text(from_spans(result.scan.phases))}")
        exit_by_rule(results)


@task(
    help={
        "host": "host, group or comma list",
        "inventory": INVENTORY_HELP,
        "grace": "seconds between TERM and KILL (default 20)",
        "force-unlock": "take the node's lock even if another operation holds it",
        "force": "stop the run even when another host entry sharing this node and workdir "
        "started it",
    }
)
def stop(
    c: Context,
    host: str | None = None,
    inventory: str | None = None,
    grace: str | None = None,
    force_unlock: bool = False,
    force: bool = False,
) -> None:
    """Stop the current run: TERM its process group, KILL after a grace period, confirm."""
    with reporting():
        grace_s = whole("grace", grace, STOP_GRACE_S)
        inv = get_inventory(c, inventory)
        names = [spec.name for spec in inv.select(require_host("stop", host))]

        def one(name: str) -> StopOutcome:
            spec = inv.host(name)
            with connected(c, inv, name) as node:
                return stop_host(
                    node,
                    spec,
                    inv.deployment_for(spec),
                    grace_s=grace_s,
                    force_unlock=force_unlock,
                    force=force,
                    on_progress=progress(name),
                )

        results = per_host(names, one)
        errors = [r for r in results.values() if isinstance(r, DeployError)]
        for result in results.values():
            if not isinstance(result, DeployError):
                say(result.text())
        if len(errors) == 1 and len(results) == 1:
            raise errors[0]
        for error in errors:
            print(shown(f"firedup: {error}"), file=sys.stderr)
        exit_by_rule(results)


@task(
    help={
        "host": HOST_HELP,
        "inventory": INVENTORY_HELP,
        "lines": "how many lines from the end (default 50)",
        "run": "run id (default: the current run)",
        "follow": "keep printing new lines until Ctrl-C (or until the server exits)",
        "raw": "the log's bytes as the node has them (secrets still masked): escape sequences "
        "reach your terminal; without it they are shown as text (\\x1b)",
    }
)
def logs(
    c: Context,
    host: str | None = None,
    inventory: str | None = None,
    lines: str | None = None,
    run: str | None = None,
    follow: bool = False,
    raw: bool = False,
) -> None:
    """Print the tail of the current run's server log (--follow: and what comes next)."""
    with reporting():
        count = whole("lines", lines, 50)
        name = require_host("logs", host)
        inv = get_inventory(c, inventory)
        spec = inv.host(name)
        with connected(c, inv, name) as node:
            meta = run_by_id(node, spec, run) if run else current_run(node, spec)
            if meta is None:
                say(f"{name}: nothing was started here")
                return
            if not follow:
                _write(tail_log(node, meta, count), raw)
                return
            tail_log(node, meta, 0)  # refuses a log that is not a regular file
            # Until the server exits (0), or Ctrl-C (130, as docs/exit-codes.md says).
            for chunk in node.stream(follow_argv(meta, count), timeout_s=1.0):
                _write(chunk, raw)


def _write(data: bytes, raw: bool) -> None:
    sys.stdout.write(log_text(data, raw=raw))
    sys.stdout.flush()
