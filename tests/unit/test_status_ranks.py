"""A multi-node deployment's ranks in one `fab status` (firedup/ops/ranks.py): a rank >= 1
logs no ready line, so its readiness is rank 0's; a dead rank is never shown ready."""

from __future__ import annotations

import json
from dataclasses import replace

import jsonschema

from firedup.config.inventory import HostSpec
from firedup.engine import Engine
from firedup.errors import TransientConnectError
from firedup.launch.runs import RunMeta
from firedup.node.probe import Probe
from firedup.ops.facts import NodeFacts
from firedup.ops.ranks import join_ranks
from firedup.ops.status import DownRank, HostStatus, RunState, rank_view, status_of
from firedup.ops.status_json import status_json
from tests.conftest import REPO
from tests.unit.test_status_state import CRASH_LINE, STARTING_LOG, look, scanned

SCHEMA = json.loads((REPO / "docs" / "status.schema.json").read_text())
NODES = ("a", "b", "c")


def run_of(host: str, rank: int, deployment: str = "mn") -> RunMeta:
    meta = RunMeta(f"r-{host}", host, deployment, Engine.SGLANG, 30000, "/w", "x", 0.0, "me")
    return replace(meta, node_rank=rank, nnodes=len(NODES), rank0_host=NODES[0])


def host(name: str, state: RunState) -> HostStatus:
    run = run_of(name, NODES.index(name))
    return HostStatus(name, state, run=run, rank=rank_view(run))


def states(*statuses: HostStatus) -> dict[str, str]:
    joined = join_ranks({s.host: s for s in statuses})
    jsonschema.validate(status_json(joined), SCHEMA)
    return {n: r.state.value for n, r in joined.items() if isinstance(r, HostStatus)}


def test_an_old_meta_json_reads_as_one_node() -> None:
    old = {k: v for k, v in json.loads(run_of("a", 0).to_json()).items() if "rank" not in k}
    old.pop("nnodes")
    meta = RunMeta.from_json(json.dumps(old))
    assert (meta.node_rank, meta.nnodes, meta.rank0_host, meta.follower) == (0, 1, None, False)
    assert rank_view(meta) is None
    assert RunMeta.from_json(run_of("b", 1).to_json()) == run_of("b", 1)


def test_live_followers_take_rank_0s_state_and_alone_are_followers() -> None:
    f = RunState.FOLLOWER
    for rank0 in (RunState.READY, RunState.STARTING, RunState.UNHEALTHY):
        said = states(host("a", rank0), host("b", f), host("c", f))
        assert said == {"a": rank0.value, "b": rank0.value, "c": rank0.value}
    alone = join_ranks({"b": host("b", f)})["b"]
    assert isinstance(alone, HostStatus) and alone.state is f and alone.rank is not None
    assert alone.rank.rank0_state is None
    assert "readiness is rank 0's (a)" in alone.rank.text() and alone.rank.asked == 1
    rank0 = join_ranks({"a": host("a", RunState.READY)})["a"]
    assert isinstance(rank0, HostStatus) and rank0.rank is not None
    assert rank0.state is RunState.READY and "only 1 of 3 ranks asked" in rank0.rank.text()


def test_a_dead_rank_is_never_ready_and_rank_0_is_unhealthy_without_it() -> None:
    f = RunState.FOLLOWER
    for dead in (RunState.EXITED, RunState.FAILED, RunState.STOPPED):
        said = states(host("a", RunState.READY), host("b", dead), host("c", f))
        assert said == {"a": "unhealthy", "b": dead.value, "c": "unhealthy"}
    joined = join_ranks({n: host(n, RunState.READY if n == "a" else RunState.EXITED) for n in "ab"})
    a = joined["a"]
    assert isinstance(a, HostStatus) and a.rank is not None
    assert a.rank.down == (DownRank("b", 1, RunState.EXITED),)
    assert "rank 1 on b exited" in a.rank.text()


def test_a_follower_of_a_dead_or_unreachable_rank_0_says_so() -> None:
    f = RunState.FOLLOWER
    assert states(host("a", RunState.FAILED), host("b", f)) == {"a": "failed", "b": "follower"}
    joined = join_ranks({"a": TransientConnectError("no route"), "b": host("b", f)})
    b = joined["b"]
    assert isinstance(b, HostStatus) and b.state is f and b.rank is not None
    assert b.rank.rank0_state == "unknown"
    never = HostStatus("a", RunState.NEVER)
    b = join_ranks({"a": never, "b": host("b", f)})["b"]
    assert isinstance(b, HostStatus) and b.rank is not None
    assert b.rank.rank0_state == "never-deployed"


def test_another_deployment_on_rank_0s_host_is_not_its_rank_0() -> None:
    other = replace(host("a", RunState.READY), run=run_of("a", 0, deployment="other"))
    b = join_ranks({"a": other, "b": host("b", RunState.FOLLOWER)})["b"]
    assert isinstance(b, HostStatus) and b.state is RunState.FOLLOWER and b.rank is not None
    assert b.rank.rank0_state == "unknown"


def facts_of(run: RunMeta, probe: Probe, log: bytes) -> NodeFacts:
    return NodeFacts(
        1.0, run, None, (), (), probe, scanned(log), len(log), None, "", None, None, None
    )


def test_a_follower_alone_from_its_own_signals() -> None:
    """status_of, before any join: a live rank >= 1 without a fatal line is a follower (its
    dummy /health answering 200 or no port at all), one whose log failed is failed, with
    the reason; rank 0 and a single node keep their own states."""
    spec = HostSpec(name="b", address="n", workdir="/w", deployment="mn")
    b = run_of("b", 1)
    for probe in (look(), look(listening=False, health=None)):
        assert status_of(spec, facts_of(b, probe, STARTING_LOG)).state is RunState.FOLLOWER
    failed = status_of(spec, facts_of(b, look(), STARTING_LOG + CRASH_LINE))
    assert failed.state is RunState.FAILED and failed.scan and failed.scan.reason is not None
    assert status_of(spec, facts_of(b, look(alive=False), STARTING_LOG)).state is RunState.EXITED
    starting = look(listening=False, health=None)
    assert status_of(spec, facts_of(run_of("a", 0), starting, STARTING_LOG)).state is (
        RunState.STARTING
    )
    one = replace(b, node_rank=0, nnodes=1, rank0_host=None)
    alone = status_of(spec, facts_of(one, starting, STARTING_LOG))
    assert alone.state is RunState.STARTING and alone.rank is None
