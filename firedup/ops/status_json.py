"""`fab status --json`: one stable, documented object (docs/status.md, docs/status.schema.json).

Format version 1. Fields are only ever added; a change of meaning gets a new version.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from firedup.errors import DeployError
from firedup.ops.status import HostStatus
from firedup.readiness.timeline import from_spans

FORMAT = 1


def _signals(status: HostStatus) -> dict[str, Any] | None:
    s = status.signals
    if s is None:
        return None
    return {
        "alive": s.alive,
        "ready_line": s.log_ready,
        "listening": s.listening,
        "health": s.health,
        "foreign_listeners": list(s.foreign_listeners),
    }


def host_json(status: HostStatus) -> dict[str, Any]:
    run, scan = status.run, status.scan
    return {
        "host": status.host,
        "reachable": True,
        "error": None,
        "state": status.state.value,
        "run_id": run.run_id if run else None,
        "deployment": run.deployment if run else None,
        "engine": run.engine.value if run else None,
        "engine_version": run.engine_version if run else None,
        "pid": run.pid if run else None,
        "port": run.port if run else None,
        "run_gpus": list(run.gpus) if run and run.gpus is not None else None,
        "runtime": run.runtime if run else None,
        "container": run.container if run else None,
        "image": run.image if run else None,
        "started_at": run.started_at if run else None,
        "started_by": run.started_by if run else None,
        "uptime_s": round(status.uptime_s, 1) if status.uptime_s is not None else None,
        "phase": scan.phase.value if scan else None,
        "reason": scan.reason.value if scan and scan.reason else None,
        "hint": scan.hint if scan else None,
        "signals": _signals(status),
        "gpus": [g.to_json() for g in status.gpus] if status.gpus is not None else None,
        "memory": status.memory.to_json() if status.memory is not None else None,
        "patches": list(status.patches),
        "last_deploy": vars(status.last_deploy).copy() if status.last_deploy else None,
        "decode": status.decode.to_json() if status.decode else None,
        "lock": status.lock.to_json() if status.lock else None,
        "timeline": from_spans(scan.phases).to_json() if scan else None,
        "watch": status.watch.to_json() if status.watch else None,
        "log_refused": status.log_refused,
        "rank": status.rank.to_json() if status.rank else None,
    }


def unreachable_json(host: str, error: DeployError) -> dict[str, Any]:
    return {
        "host": host,
        "reachable": False,
        "error": str(error).splitlines()[0],
        "state": "unknown",
    }


def status_json(results: Mapping[str, HostStatus | DeployError]) -> dict[str, Any]:
    hosts = [
        unreachable_json(name, r) if isinstance(r, DeployError) else host_json(r)
        for name, r in results.items()
    ]
    return {"format": FORMAT, "hosts": hosts}
