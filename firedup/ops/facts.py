"""A host's facts for `fab status` and `fab top` in one round trip (firedup.readiness.nodefacts).

`FACTS` names each fact the node gathers (an argv of a shipped script, its arguments
positional) and `NodeFacts` holds each one parsed by the parser beside its script. Adding a
fact: one entry in `fact_argvs`, one field in `NodeFacts`, one line in `parse_facts`.
A node that cannot run the shipped python gets None: the caller asks fact by fact.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, replace
from typing import Any

from firedup.config.deployment import Deployment
from firedup.config.inventory import HostSpec
from firedup.launch.gpus import GpuMemory, parse_gpus, smi_argv
from firedup.launch.keepalive import WatchView
from firedup.launch.runs import RunMeta, parse_current
from firedup.logscan import ScanState
from firedup.node.base import Node, script_argv
from firedup.node.lock_info import LockInfo, parse_lock_status
from firedup.node.probe import Probe, parse_probe
from firedup.ops import decode
from firedup.ops.history import HistoryRecord, history_path, parse_history
from firedup.patching.record import parse_record, record_path
from firedup.readiness.logfeed import scan_from_json
from firedup.readiness.shipping import FACTS, FrameParser, new_nonce, reader_argv
from firedup.readiness.watch import LIVENESS

HISTORY_LINES = 51  # one more than status shows: a torn last line takes a slot
LOG_BOUNDS = {
    "head_bytes": 64 * 1024 * 1024,  # no summary: the log in order up to here
    "tail_bytes": 4 * 1024 * 1024,  # a dead server's last words
    "decode_bytes": 256 * 1024,  # the serving stats' recent lines
    "budget_s": 3.0,  # reading the log never takes longer
    "decode_markers": list(decode.MARKERS),  # only these lines of that tail cross the link
    "decode_lines": decode.RECENT,
}
METRIC_PREFIXES = ("vllm:", "sglang:")
RUN_FILES = ("watch.json",)  # the watch's view of the run (issue 25), when there is one


@dataclass(frozen=True)
class NodeFacts:
    """What one round trip told about a host (None where the node had no answer)."""

    node_time: float
    run: RunMeta | None
    lock: LockInfo | None
    history: tuple[HistoryRecord, ...]
    patches: tuple[str, ...]
    probe: Probe | None
    scan: ScanState | None
    log_size: int | None
    log_refused: str | None
    decode_tail: str
    gpus: tuple[GpuMemory, ...] | None
    metrics: str | None
    watch: WatchView | None


def fact_argvs(host: HostSpec, deployment: Deployment | None) -> dict[str, list[str]]:
    facts = {
        "lock": script_argv("lock_status", host.workdir),
        "history": script_argv("history_read", history_path(host), str(HISTORY_LINES)),
        "patches": ["cat", "--", record_path(host)],
        "probe": script_argv("probe", "@rundir", "@port", "0", "0", "@health"),
    }
    if deployment is not None:
        facts["gpus"] = smi_argv(host, deployment)
    return facts


def facts_options(
    host: HostSpec, deployment: Deployment | None, *, metrics: bool = False
) -> dict[str, Any]:
    return {
        "workdir": host.workdir,
        "current": script_argv("current", host.workdir),
        "facts": fact_argvs(host, deployment),
        "log": LOG_BOUNDS,
        "metrics": {"prefixes": list(METRIC_PREFIXES)} if metrics else None,
        "files": list(RUN_FILES),
        "live": {str(engine): path for engine, path in LIVENESS.items()},
    }


def _bytes(value: str | None) -> bytes | None:
    return base64.b64decode(value) if value else None


def _scan(log: dict[str, Any]) -> ScanState | None:
    if "scan" not in log:
        return None
    scan = scan_from_json(log["scan"])
    if "tail_scan" in log:  # a dead server's last words name a failure the summary missed
        tail = scan_from_json(log["tail_scan"])
        scan = replace(tail, phase=scan.phase, phases=scan.phases)
    return scan


def _watch(text: str | None, alive: bool) -> WatchView | None:
    """The watch's own view, as it wrote it; `alive`: the watch process it names still runs
    (with the start time it recorded), read on the node in the same round trip."""
    if not text:
        return None
    try:
        return replace(WatchView.from_json(text), alive=alive)
    except (ValueError, TypeError, AttributeError):
        return None


def parse_facts(host: HostSpec, frame: dict[str, Any]) -> NodeFacts:
    facts: dict[str, str | None] = frame.get("facts") or {}
    out = {k: _bytes(v) for k, v in facts.items()}
    current = _bytes(frame.get("current"))
    run = parse_current(current) if current else None
    log: dict[str, Any] = frame.get("log") or {}
    patches, probe, gpus = out.get("patches"), out.get("probe"), out.get("gpus")
    return NodeFacts(
        node_time=float(frame["now"]),
        run=run,
        lock=parse_lock_status(host.name, out["lock"] or b""),
        history=tuple(parse_history(out["history"] or b"")[-(HISTORY_LINES - 1) :]),
        patches=tuple(sorted(parse_record(patches, record_path(host), host.name).patches))
        if patches
        else (),
        probe=parse_probe(probe) if run is not None and probe else None,
        scan=_scan(log),
        log_size=log.get("size"),
        log_refused=log.get("refused"),
        decode_tail=str(log.get("decode") or ""),
        gpus=parse_gpus(gpus.decode("utf-8", "replace")) if gpus else None,
        metrics=frame.get("metrics"),
        watch=_watch((frame.get("files") or {}).get("watch.json"), bool(frame.get("watch_alive"))),
    )


def gather_facts(
    node: Node,
    host: HostSpec,
    deployment: Deployment | None = None,
    *,
    metrics: bool = False,
    timeout_s: float = 60.0,
) -> NodeFacts | None:
    """Every fact in one command; None when the node cannot run the shipped python."""
    nonce = new_nonce()
    parser = FrameParser(nonce)
    options = facts_options(host, deployment, metrics=metrics)
    argv = reader_argv(options, nonce, ["true"], entry=FACTS)
    result = node.run(argv, check=False, timeout_s=timeout_s, what="read status")
    states, _raw = parser.feed(result.stdout)
    if parser.mode != "node" or not states:
        return None
    return parse_facts(host, states[-1])
