"""`fab top`: what each host is doing now, one refresh at a time (docs/top.md).

Each refresh is status's one round trip (ops/facts.py) with `/metrics` asked on the node: no
port is opened to the operator, so a bastion or a slow link works as for status. `TopHost`
keeps the previous refresh of its host, for rates (tokens/s, latencies over the interval) and
a starting server's ETA (its bar's pace).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from firedup.config.deployment import Deployment
from firedup.config.inventory import HostSpec
from firedup.errors import DeployError
from firedup.logscan import Progress
from firedup.node.base import Node
from firedup.ops.facts import NodeFacts, gather_facts
from firedup.ops.ranks import join_ranks
from firedup.ops.serving import serving
from firedup.ops.status import HostStatus, RunState, status_of
from firedup.releases.prometheus import Sample, parse_samples

FORMAT = 1


@dataclass(frozen=True)
class TopRow:
    host: str
    state: str
    phase: str | None = None
    progress: Progress | None = None
    eta_s: float | None = None
    engine: str | None = None
    run_id: str | None = None
    metrics: dict[str, float | None] = field(default_factory=dict)
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        bar = self.progress
        return {
            "format": FORMAT,
            "host": self.host,
            "state": self.state,
            "phase": self.phase,
            "progress": {"label": bar.label, "done": bar.done, "total": bar.total} if bar else None,
            "eta_s": self.eta_s,
            "engine": self.engine,
            "run_id": self.run_id,
            "metrics": dict(self.metrics),
            "error": self.error,
        }


def gpu_numbers(facts: NodeFacts) -> dict[str, float | None]:
    gpus = facts.gpus or ()
    utils = [g.util_pct for g in gpus if g.util_pct is not None]
    return {
        "gpu_util_pct": round(sum(utils) / len(utils), 1) if utils else None,
        "gpu_mem_used_mib": sum(g.used_mib for g in gpus) if gpus else None,
        "gpu_mem_total_mib": sum(g.total_mib for g in gpus) if gpus else None,
    }


@dataclass
class TopHost:
    """One host's rows over time: the previous sample and bar, for rates and the ETA."""

    host: HostSpec
    deployment: Deployment | None
    before: Sample | None = None
    bar: tuple[float, Progress] | None = None
    run_id: str | None = None
    status: HostStatus | None = None  # the last row's, to read a deployment's ranks together

    def refresh(self, node: Node) -> TopRow:
        facts = gather_facts(node, self.host, self.deployment, metrics=True)
        if facts is None:
            return TopRow(self.host.name, "unknown", error="the node has no python3 >= 3.8")
        return self.row(facts)

    def row(self, facts: NodeFacts) -> TopRow:
        """The row these facts make, after the previous one (pure but for the memory)."""
        status = self.status = status_of(self.host, facts)
        run, scan = status.run, status.scan
        if run is None or run.run_id != self.run_id:  # a new run: its counters start over
            self.before, self.bar = None, None
            self.run_id = run.run_id if run else None
        metrics: dict[str, float | None] = gpu_numbers(facts)
        if run is not None and facts.metrics is not None:
            sample = parse_samples(facts.metrics, facts.node_time)
            metrics = {**serving(run.engine, sample, self.before), **metrics}
            self.before = sample
        progress = scan.progress if scan is not None else None
        starting = status.state is RunState.STARTING
        return TopRow(
            host=self.host.name,
            state=status.state.value,
            phase=scan.phase.value if scan else None,
            progress=progress if starting else None,
            eta_s=self._eta(progress, facts.node_time) if starting else None,
            engine=run.engine.value if run else None,
            run_id=run.run_id if run else None,
            metrics=metrics,
        )

    def _eta(self, bar: Progress | None, now: float) -> float | None:
        """Seconds left at the bar's pace since it was first seen (None until it moved)."""
        if bar is None or self.bar is None or self.bar[1].label != bar.label:
            self.bar = (now, bar) if bar is not None else None
            return None
        then, old = self.bar
        pace = (bar.done - old.done) / (now - then) if now > then else 0.0
        return round((bar.total - bar.done) / pace, 1) if pace > 0 else None


def unreachable_row(host: str, error: DeployError) -> TopRow:
    return TopRow(host, "unreachable", error=str(error).splitlines()[0])


def fleet_rows(
    tops: Mapping[str, TopHost], results: Mapping[str, TopRow | DeployError]
) -> list[TopRow]:
    """One refresh's rows, a multi-node deployment's ranks read together as status does
    (ops/ranks.py): a follower shows rank 0's state, a rank 0 with a dead rank unhealthy."""
    statuses: dict[str, HostStatus | DeployError] = {}
    for name, result in results.items():
        status = result if isinstance(result, DeployError) else tops[name].status
        if status is not None:
            statuses[name] = status
    joined = join_ranks(statuses)
    rows = []
    for name, result in results.items():
        seen = joined.get(name)
        if isinstance(result, DeployError):
            rows.append(unreachable_row(name, result))
        elif isinstance(seen, HostStatus) and seen.state.value != result.state:
            rows.append(replace(result, state=seen.state.value))
        else:
            rows.append(result)
    return rows
