"""What was done to a node, by whom, and how it ended: JSON lines in `<workdir>/history.jsonl`.

Every deploy, stop and patch action appends one record on the node itself, so the answer to
"who started what on gpu-node" is there for any operator, from any laptop. Records are
appended with one O_APPEND write each (firedup/node/sh/history_append.sh); a reader skips a line it
cannot parse (a torn last line, a record from a newer firedup) instead of failing. The same
records decide which old run directories may be pruned: never the current run, never the last
failed one. Format: docs/history.md.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from firedup import __version__
from firedup.config.inventory import HostSpec
from firedup.errors import NotReadyError, WaitInterrupted
from firedup.launch.runs import RunMeta
from firedup.logscan import ScanState
from firedup.node.base import Node, field_values, operator, run_script

HISTORY_FILE = "history.jsonl"
SCHEMA = 1
MASK = "***"
MAX_REASON_CHARS = 2000
MAX_LINE_BYTES = 64 * 1024  # one argv string must stay under the kernel's 128 KiB limit
SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|API_?KEY|PRIVATE", re.I)
PRUNE_HISTORY_LINES = 2000  # how far back "the last failed run" is looked for
RUN_ID = re.compile(r"[0-9A-Za-z][0-9A-Za-z-]*")


class Action(StrEnum):
    DEPLOY = "deploy"
    START = "start"
    RESTART = "restart"
    STOP = "stop"
    WAIT = "wait"  # `fab wait`: what it saw (ready, failed, not-ready), so a crash it alone
    # saw is evidence that pruning keeps
    SYNC_PATCHES = "sync-patches"
    REVERT_PATCHES = "revert-patches"
    WATCH = "watch"  # the node-side watch saw a run die after ready (firedup.ops.keep)


class Outcome(StrEnum):
    READY = "ready"
    STARTED = "started"  # `fab start`: launched, not waited for
    FAILED = "failed"
    NOT_READY = "not-ready"
    INTERRUPTED = "interrupted"
    STOPPED = "stopped"
    APPLIED = "applied"
    REVERTED = "reverted"


# A run whose start ended this way keeps its directory (the evidence) through pruning.
FAILED_OUTCOMES = frozenset({Outcome.FAILED, Outcome.NOT_READY})


@dataclass(frozen=True)
class PhaseTiming:
    phase: str
    duration_s: float | None


def phase_timings(scan: ScanState | None) -> tuple[PhaseTiming, ...]:
    """The phases a run walked through and how long each took (None while still open)."""
    if scan is None:
        return ()
    return tuple(PhaseTiming(span.phase.value, span.duration_s) for span in scan.phases)


def mask_env(env: Mapping[str, str], secret_keys: Iterable[str] = ()) -> dict[str, str]:
    """Env overrides fit to be written down: secret values become `***`.

    A key is secret when it is named in `secret_keys` or its name looks like one (TOKEN,
    SECRET, PASSWORD, API_KEY, ...): masking too much costs a look at the inventory, masking
    too little leaks a credential into a file every operator can read.
    """
    named = set(secret_keys)
    return {k: MASK if k in named or SECRET_NAME.search(k) else v for k, v in sorted(env.items())}


@dataclass(frozen=True)
class HistoryRecord:
    """One action on one node. `env` must already be masked (see `mask_env`)."""

    action: Action
    outcome: Outcome
    host: str
    who: str
    at: datetime
    run_id: str = ""
    deployment: str = ""
    reason: str = ""
    repo_commit: str = "unknown"
    firedup_version: str = ""
    engine: str = ""
    engine_version: str = ""
    script_sha256: str = ""
    patches: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    phases: tuple[PhaseTiming, ...] = ()
    duration_s: float | None = None
    detail: str = ""
    runtime: str = ""  # where the engine ran: python, podman, docker ("" before issue 27)
    image: str = ""  # in a container: the image as named, its id and repository digest
    image_id: str = ""
    image_digest: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "v": SCHEMA,
            "at": self.at.astimezone(UTC).isoformat(timespec="milliseconds"),
            "action": self.action.value,
            "outcome": self.outcome.value,
            "reason": self.reason[:MAX_REASON_CHARS],
            "patches": list(self.patches),
            "env": dict(self.env),
            "phases": [asdict(p) for p in self.phases],
        }

    def to_line(self) -> str:
        line = json.dumps(self.to_json(), sort_keys=True, ensure_ascii=False)
        if len(line.encode()) > MAX_LINE_BYTES:  # only a huge env can do this: drop it, say so
            data = {**self.to_json(), "env": {"(dropped)": "too large to record"}}
            line = json.dumps(data, sort_keys=True, ensure_ascii=False)
        return line

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> HistoryRecord:
        """Raises ValueError/KeyError/TypeError on anything that is not a record we know."""
        return cls(
            action=Action(data["action"]),
            outcome=Outcome(data["outcome"]),
            host=str(data["host"]),
            who=str(data["who"]),
            at=datetime.fromisoformat(str(data["at"])),
            run_id=str(data.get("run_id") or ""),
            deployment=str(data.get("deployment") or ""),
            reason=str(data.get("reason") or ""),
            repo_commit=str(data.get("repo_commit") or "unknown"),
            firedup_version=str(data.get("firedup_version") or ""),
            engine=str(data.get("engine") or ""),
            engine_version=str(data.get("engine_version") or ""),
            script_sha256=str(data.get("script_sha256") or ""),
            patches=tuple(str(p) for p in data.get("patches") or ()),
            env={str(k): str(v) for k, v in (data.get("env") or {}).items()},
            phases=tuple(
                PhaseTiming(str(p["phase"]), _seconds(p.get("duration_s")))
                for p in data.get("phases") or ()
            ),
            duration_s=_seconds(data.get("duration_s")),
            detail=str(data.get("detail") or ""),
            runtime=str(data.get("runtime") or ""),
            image=str(data.get("image") or ""),
            image_id=str(data.get("image_id") or ""),
            image_digest=str(data.get("image_digest") or ""),
        )


def _seconds(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def outcome_of(error: BaseException | None) -> tuple[Outcome, str]:
    """How a deploy/start/restart ended, from what its wait raised (None: it became ready)."""
    if error is None:
        return Outcome.READY, ""
    reason = str(error).splitlines()[0] if str(error) else type(error).__name__
    if isinstance(error, WaitInterrupted | KeyboardInterrupt):
        return Outcome.INTERRUPTED, reason or "interrupted"
    if isinstance(error, NotReadyError):
        return Outcome.NOT_READY, reason
    return Outcome.FAILED, reason


def run_record(
    action: Action,
    outcome: Outcome,
    run: RunMeta,
    *,
    reason: str = "",
    scan: ScanState | None = None,
    env: Mapping[str, str] | None = None,
    secret_keys: Iterable[str] = (),
    patches: Iterable[str] = (),
    engine_version: str = "",
    commit: str | None = None,
    duration_s: float | None = None,
    detail: str = "",
) -> HistoryRecord:
    """A record about one run, with who/when/version filled in and the env masked.

    `commit` is the inventory repository's (`inventory_commit`), given by the caller."""
    return HistoryRecord(
        action=action,
        outcome=outcome,
        host=run.host,
        who=operator(),
        at=datetime.now(UTC),
        run_id=run.run_id,
        deployment=run.deployment,
        reason=reason,
        repo_commit=commit or "unknown",
        firedup_version=__version__,
        engine=run.engine.value,
        engine_version=engine_version,
        script_sha256=run.script_sha256,
        patches=tuple(patches),
        env=mask_env(env or {}, secret_keys),
        phases=phase_timings(scan),
        duration_s=duration_s,
        detail=detail,
        runtime=run.runtime,
        image=run.image or "",
        image_id=run.image_id or "",
        image_digest=run.image_digest or "",
    )


def parse_history(data: bytes) -> list[HistoryRecord]:
    """JSON lines -> records, oldest first; lines that are not records are skipped."""
    records = []
    for line in data.decode("utf-8", "replace").splitlines():
        try:
            records.append(HistoryRecord.from_json(json.loads(line)))
        except (ValueError, KeyError, TypeError, AttributeError):
            continue
    return records


def history_path(host: HostSpec) -> str:
    return posixpath.join(host.workdir, HISTORY_FILE)


def append_history(node: Node, host: HostSpec, record: HistoryRecord) -> None:
    run_script(node, "history_append", host.workdir, record.to_line(), what="append history")


def read_history(node: Node, host: HostSpec, limit: int = 50) -> list[HistoryRecord]:
    """The last `limit` records (oldest first); [] when nothing was ever recorded."""
    # One line more than asked: a torn last line takes a slot but is no record.
    lines = str(max(0, limit) + 1)
    result = run_script(node, "history_read", history_path(host), lines, what="read history")
    return parse_history(result.stdout)[-limit:] if limit > 0 else []


@dataclass(frozen=True)
class PrunePlan:
    keep: tuple[str, ...]
    remove: tuple[str, ...]
    protected: Mapping[str, str]  # run id -> why it is kept beyond the limit


STARTS = frozenset({Action.DEPLOY, Action.START, Action.RESTART})


def stop_of(records: Sequence[HistoryRecord], run_id: str) -> HistoryRecord | None:
    """The record of `fab stop` ending `run_id`, if one did."""
    return next(
        (
            r
            for r in reversed(records)
            if r.run_id == run_id and r.action is Action.STOP and r.outcome is Outcome.STOPPED
        ),
        None,
    )


def last_start(records: Sequence[HistoryRecord]) -> HistoryRecord | None:
    """The most recent deploy/start/restart: its outcome and reason, for `fab status`."""
    return next((r for r in reversed(records) if r.action in STARTS), None)


def last_failed_run(records: Sequence[HistoryRecord]) -> str | None:
    """The run of the most recent start that failed or never became ready."""
    for record in reversed(records):
        if record.run_id and record.outcome in FAILED_OUTCOMES:
            return record.run_id
    return None


def plan_prune(
    run_ids: Iterable[str],
    current: str | None,
    records: Sequence[HistoryRecord],
    keep_runs: int,
) -> PrunePlan:
    """Keep the newest `keep_runs` runs (ids sort by start time), the current one and the last
    failed one; remove the rest."""
    if keep_runs < 0:
        raise ValueError(f"keep_runs must be >= 0, got {keep_runs}")
    ordered = sorted({r for r in run_ids if RUN_ID.fullmatch(r)}, reverse=True)
    newest = set(ordered[:keep_runs])
    protected = {}
    failed = last_failed_run(records)
    for run_id, why in ((failed, "last failed"), (current, "current")):
        if run_id in ordered and run_id not in newest:
            protected[run_id] = why
    keep = tuple(r for r in ordered if r in newest or r in protected)
    remove = tuple(r for r in ordered if r not in keep)
    return PrunePlan(keep=keep, remove=remove, protected=protected)


@dataclass(frozen=True)
class PruneReport:
    removed: tuple[str, ...]
    kept: tuple[str, ...]
    refused: Mapping[str, str]  # planned for removal but kept by the node's own check, and why


def prune_runs(node: Node, host: HostSpec, keep_runs: int) -> PruneReport:
    """Remove run directories past `keep_runs`; call it under the node's lock."""
    listing = run_script(node, "history_runs", host.workdir, what="list runs").stdout
    current = (field_values(listing, "current") or [""])[0] or None
    plan = plan_prune(
        field_values(listing, "run"),
        current,
        read_history(node, host, PRUNE_HISTORY_LINES),
        keep_runs,
    )
    if not plan.remove:
        return PruneReport(removed=(), kept=plan.keep, refused={})
    out = run_script(node, "history_prune", host.workdir, *plan.remove, what="prune runs").stdout
    removed = tuple(field_values(out, "removed"))
    refused = dict(ln.partition(" ")[::2] for ln in field_values(out, "kept"))
    return PruneReport(removed=removed, kept=(*plan.keep, *refused), refused=refused)
