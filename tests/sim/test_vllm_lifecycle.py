"""vLLM: the port is bound at startup but listens only when ready; no "Uvicorn running on"."""

from __future__ import annotations

import errno
import os
import socket

from tests.sim.simhelp import children, cmdline, listening, scenarios

VLLM_TP2 = scenarios.Scenario("tp2", "vllm", ("sim/models/tiny-llama", "-tp", "2"), "ready")


def _bind_fails(port: int) -> bool:
    # Without SO_REUSEADDR: two reuse-address sockets may share a port that nobody listens on.
    with socket.socket() as s:
        try:
            s.bind(("0.0.0.0", port))
        except OSError as exc:
            return exc.errno == errno.EADDRINUSE
    return False


def test_ready_lifecycle(launch) -> None:  # type: ignore[no-untyped-def]
    run = launch(VLLM_TP2, speed=2.0)
    assert run.wait_text("Starting to load model", 30)
    assert _bind_fails(run.port), "vLLM binds its port before the engine starts"
    assert not listening(run.port), "but listen() waits until the engine is ready"
    engine = next(pid for pid in children(run.pid) if cmdline(pid) == "VLLM::EngineCore")
    assert sorted(cmdline(pid) for pid in children(engine)) == [
        "VLLM::Worker_TP0",
        "VLLM::Worker_TP1",
    ]
    assert run.wait_for(lambda: run.http_status("/health") == 200, 30)
    lines = run.log().splitlines()
    first_access = next(i for i, line in enumerate(lines) if '"GET /health' in line)
    assert lines[first_access - 1].endswith("INFO:     Application startup complete.")
    assert "Uvicorn running on" not in run.log()
    assert run.events()[0]["event"] == "ready"
    reply = run.post_json("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}]})
    assert reply["choices"][0]["message"]["content"]
    os.killpg(run.pid, 15)
    assert run.wait_exit(10) == 0


def test_busy_port_fails_before_the_engine_starts(launch) -> None:  # type: ignore[no-untyped-def]
    run = launch(scenarios.by_name("vllm", "tiny-port-busy"))
    assert run.wait_exit(20) == 1
    assert "OSError: [Errno 98] Address already in use" in run.log()
    assert "Initializing a V1 LLM engine" not in run.log()


def test_unknown_flag_fails_like_argparse(launch) -> None:  # type: ignore[no-untyped-def]
    bad = scenarios.Scenario("bad-flag", "vllm", ("sim/models/tiny-llama", "--no-such"), "exit")
    run = launch(bad)
    assert run.wait_exit(20) == 2
    assert "error: unrecognized arguments: --no-such" in run.log()


def test_multinode_head_serves_headless_rank_joins_and_dies_with_the_head(launch) -> None:  # type: ignore[no-untyped-def]
    """vllm serve over two nodes (vLLM >= 0.12): rank 0 serves once rank 1 has joined at
    --master-addr:--master-port; rank 1 (--headless) runs its workers only and exits when
    rank 0 is gone."""
    from tests.sim.simhelp import simrun

    master = str(simrun.free_port())
    common = ("sim/models/tiny-llama", "-tp", "4", "--nnodes", "2", "--master-addr", "127.0.0.1")

    def node(rank: int, *extra: str) -> scenarios.Scenario:
        args = (*common, "--node-rank", str(rank), "--master-port", master, *extra)
        return scenarios.Scenario(f"mn{rank}", "vllm", args, "ready")

    head = launch(node(0))
    assert head.wait_text("Initializing a V1 LLM engine", 30)
    assert not head.wait_text("Starting to load model", 1.0), "rank 0 waits for rank 1"
    worker = launch(node(1, "--headless"))
    assert head.wait_for(lambda: head.http_status("/health") == 200, 60), head.log()
    assert worker.wait_text("headless multiproc executor, with head node address 127.0.0.1:", 5)
    assert sorted(cmdline(pid) for pid in children(worker.pid)) == [
        "VLLM::Worker_TP2",
        "VLLM::Worker_TP3",
    ]
    assert "Starting vLLM server" not in worker.log() and not listening(worker.port)
    head.stop()
    assert worker.wait_exit(30) == 1
    assert "Connection to the head node 127.0.0.1:" in worker.log()
