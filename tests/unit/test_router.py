"""The router hand-off's pure parts: its inventory key, the in-flight count read off real
/metrics text, the node snippet's answers, and the rules of a roll."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from firedup.config.inventory import parse_inventory
from firedup.config.router import RouterSpec
from firedup.engine import Engine
from firedup.errors import PreflightError, RouterError
from firedup.ops.handoff import worker_url
from firedup.ops.rolling import Step, batches, roll
from firedup.router.drain import drain, in_flight_of
from firedup.router.http import NoAnswer, parse_answer

# As the real servers print them (vllm 0.32 for CPU; sglang 0.5.9 with --enable-metrics).
VLLM_METRICS = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="tiny"} 2.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="tiny"} 1.0
vllm:num_requests_waiting_by_reason{engine="0",model_name="tiny",reason="capacity"} 7.0
"""
SGLANG_METRICS = """\
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{engine_type="unified",model_name="m",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 0.0
sglang:num_running_reqs{engine_type="unified",model_name="m",moe_ep_rank="0",pp_rank="0",tp_rank="1"} 0.0
sglang:num_queue_reqs{engine_type="unified",model_name="m",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 3.0
sglang:num_used_tokens{engine_type="unified",model_name="m",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 900.0
"""  # noqa: E501


def test_in_flight_sums_running_and_waiting_over_label_sets_and_nothing_else() -> None:
    assert in_flight_of(VLLM_METRICS, Engine.VLLM) == 3  # waiting_by_reason is not counted
    assert in_flight_of(SGLANG_METRICS, Engine.SGLANG) == 3
    assert in_flight_of(SGLANG_METRICS, Engine.VLLM) is None  # no count: wait the grace out
    assert in_flight_of("", Engine.SGLANG) is None


def test_drain_ends_at_zero_and_waits_the_grace_out_without_a_count() -> None:
    now = [0.0]
    readings = iter([2, 1, 0])
    done = drain(lambda: next(readings), 30, clock=lambda: now[0], sleep=_advance(now))
    assert done.in_flight == 0 and done.seconds == pytest.approx(0.4)
    now[0] = 0.0
    blind = drain(lambda: None, 5, clock=lambda: now[0], sleep=_advance(now))
    assert blind.in_flight is None and blind.seconds >= 5
    assert "grace period" in blind.text()


def _advance(now: list[float]):  # type: ignore[no-untyped-def]
    def sleep(seconds: float) -> None:
        now[0] += seconds

    return sleep


def test_the_node_snippets_answers_become_values_or_typed_errors() -> None:
    answer = parse_answer(json.dumps({"status": 202, "body": '{"ok": 1}'}).encode(), "POST x")
    assert answer.status == 202 and answer.json() == {"ok": 1}
    with pytest.raises(NoAnswer) as refused:
        parse_answer(b'{"error": "URLError: refused", "refused": true}\n', "GET y")
    assert refused.value.refused and "GET y" in str(refused.value)
    with pytest.raises(RouterError):
        parse_answer(b"", "GET z")


def test_router_spec_takes_http_urls_only() -> None:
    assert RouterSpec(url="http://r:30000/").url == "http://r:30000"
    for bad in ("r:30000", "ftp://r", "http://r/?x=1", "http://"):
        with pytest.raises(ValidationError):
            RouterSpec(url=bad)


def test_worker_url_is_how_the_router_reaches_the_worker() -> None:
    inv = parse_inventory(
        {
            "hosts": {
                "a": {"address": "gpu-a", "workdir": "/w", "deployment": "d"},
                "b": {
                    "address": "gpu-b",
                    "node_address": "fd00::7",
                    "workdir": "/w",
                    "deployment": "d",
                },
                "c": {"address": "gpu-c", "workdir": "/w", "deployment": "e"},
            },
            "deployments": {
                "d": {
                    "engine": "sglang",
                    "model": "/m",
                    "port": 8000,
                    "router": {"url": "http://router:30000"},
                },
                "e": {
                    "engine": "vllm",
                    "model": "/m",
                    "port": 8001,
                    "router": {"url": "http://router:30000", "worker_url": "http://w-c:81"},
                },
            },
        },
        Path("hosts.yaml"),
    )
    urls = {n: worker_url(inv.host(n), inv.deployment_for(inv.host(n))) for n in "abc"}
    assert urls == {"a": "http://gpu-a:8000", "b": "http://[fd00::7]:8000", "c": "http://w-c:81"}


def test_a_roll_goes_batch_by_batch_and_stops_at_the_first_failure() -> None:
    assert batches(["a", "b", "c", "d", "e"], 2) == [["a", "b"], ["c", "d"], ["e"]]
    restarted: list[list[str]] = []

    def restart(batch: list[str]) -> dict[str, object]:
        restarted.append(batch)
        return {u: (PreflightError(f"{u}: preflight failed") if u == "c" else "ok") for u in batch}

    skipped: list[str] = []
    out = roll(
        ["a", "b", "c", "d", "e"],
        2,
        serving_outside=lambda _b: 3,
        restart=restart,
        on_skip=lambda u, _w: skipped.append(u),
    )
    assert restarted == [["a", "b"], ["c", "d"]]  # the batch with c finished; e never began
    assert {u: s for u, (s, _d) in out.steps.items()} == {
        "a": Step.RESTARTED, "b": Step.RESTARTED, "c": Step.FAILED, "d": Step.RESTARTED,
        "e": Step.NOT_REACHED,
    }  # fmt: skip
    assert not out.ok and out.stopped.startswith("c failed") and list(out.failures) == ["c"]
    assert skipped == ["e"]


def test_a_roll_never_takes_out_the_last_healthy_worker() -> None:
    out = roll(["a", "b"], 1, serving_outside=lambda _b: 0, restart=lambda b: {u: 1 for u in b})
    assert not out.ok and "no worker serving" in out.stopped
    assert all(step is Step.NOT_REACHED for step, _d in out.steps.values())
