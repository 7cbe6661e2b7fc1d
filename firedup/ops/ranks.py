"""A multi-node deployment in one `fab status`: each rank's state read with the others'.

A rank >= 1 logs no ready line and serves no API (SGLang's answers a dummy /health, vLLM's
`--headless` none): alone it is a `follower` naming rank 0's host. When the same call asked
rank 0 too, a live follower takes rank 0's state, and a ready rank 0 whose follower is dead
is `unhealthy`: it cannot serve without that rank. Every rank of the deployment lists the
ranks the call saw dead (pure; ops/status.py reads each host).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from firedup.errors import DeployError
from firedup.ops.status import LIVE, DownRank, HostStatus, RunState

DEAD = frozenset({RunState.FAILED, RunState.EXITED, RunState.STOPPED})


def _group_key(status: HostStatus) -> tuple[str, str] | None:
    """Which deployment's ranks a status belongs to: (rank 0's host, deployment)."""
    run, rank = status.run, status.rank
    if run is None or rank is None or rank.rank0_host is None:
        return None
    return rank.rank0_host, run.deployment


def join_ranks(
    results: Mapping[str, HostStatus | DeployError],
) -> dict[str, HostStatus | DeployError]:
    """The results with each multi-node rank's state and view read against its peers'."""
    groups: dict[tuple[str, str], list[HostStatus]] = {}
    for result in results.values():
        if isinstance(result, HostStatus) and (key := _group_key(result)) is not None:
            groups.setdefault(key, []).append(result)
    out = dict(results)
    for (rank0_host, _deployment), ranks in groups.items():
        for status in _joined(ranks, results.get(rank0_host)):
            out[status.host] = status
    return out


def _node_rank(status: HostStatus) -> int:
    return status.rank.node_rank if status.rank else 0


def _rank0_state(ranks: Sequence[HostStatus], down: tuple[DownRank, ...]) -> RunState | None:
    """Rank 0's state among `ranks` (None when it is not among them); a ready rank 0 with a
    dead rank is unhealthy: it cannot serve without it."""
    rank0 = next((s for s in ranks if _node_rank(s) == 0), None)
    if rank0 is None:
        return None
    return RunState.UNHEALTHY if rank0.state is RunState.READY and down else rank0.state


def _joined(
    ranks: Sequence[HostStatus], leader: HostStatus | DeployError | None
) -> list[HostStatus]:
    """One deployment's ranks; `leader` is rank 0's host's result (None when not asked)."""
    ordered = sorted(ranks, key=_node_rank)
    down = tuple(DownRank(s.host, _node_rank(s), s.state) for s in ordered if s.state in DEAD)
    rank0_state = _rank0_state(ordered, down)
    seen = rank0_state.value if rank0_state else _absent(leader)
    joined = []
    for status in ordered:
        state = status.state
        follows = state is RunState.FOLLOWER and rank0_state in LIVE
        if rank0_state is not None and (_node_rank(status) == 0 or follows):
            state = rank0_state
        view = status.rank and replace(status.rank, rank0_state=seen, down=down, asked=len(ordered))
        joined.append(replace(status, state=state, rank=view))
    return joined


def _absent(leader: HostStatus | DeployError | None) -> str | None:
    """Rank 0's state when its host runs no rank of this deployment: None when not asked,
    `unknown` when unreachable or running something else."""
    if leader is None:
        return None
    if isinstance(leader, HostStatus) and leader.run is None:
        return leader.state.value  # never deployed
    return "unknown"
