"""A healthy SGLang launch: process tree, late port, /health 503 -> 200, clean SIGTERM."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from tests.sim.simhelp import REPO, children, cmdline, comm, listening, scenarios, simrun

FIRED = scenarios.FIRED


def _nvidia_smi(run, query: str) -> str:  # type: ignore[no-untyped-def]
    argv = [str(REPO / "sim" / "bin" / "nvidia-smi"), query, "--format=csv,noheader,nounits"]
    return subprocess.run(argv, env=run.env, capture_output=True, text=True, check=True).stdout


def test_ready_lifecycle_port_opens_late_and_health_turns_200(launch) -> None:  # type: ignore[no-untyped-def]
    run = launch(scenarios.by_name("sglang", "tiny-ready"), speed=1.5)
    seen_health, models_before_up = [], []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and FIRED not in run.log():
        log_before = run.log()
        if listening(run.port):
            assert "Uvicorn running on" in run.log(), "port open before uvicorn started"
            status = run.http_status("/health")
            seen_health.append(status)
            if status == 503:
                models_before_up.append(run.http_status("/v1/models"))
        else:
            assert "Uvicorn running on" not in log_before
        time.sleep(0.02)
    assert FIRED in run.log()
    assert 503 in seen_health, seen_health
    assert 200 in models_before_up, "/v1/models answers before warmup"
    assert run.wait_for(lambda: run.http_status("/health") == 200, 10)
    assert run.events()[0]["event"] == "ready"

    kids = children(run.pid)
    titles = sorted(cmdline(pid) for pid in kids)
    assert titles == ["sglang::detokenizer", "sglang::scheduler"]
    assert {comm(pid) for pid in kids} == {"sglang::detoken", "sglang::schedul"}
    assert "sglang.launch_server" in cmdline(run.pid)

    gpu0 = _nvidia_smi(run, "--query-gpu=index,memory.used").splitlines()[0]
    assert int(gpu0.split(", ")[1]) > 100_000  # weights + KV pool of a 0.88 fraction
    apps = _nvidia_smi(run, "--query-compute-apps=pid,process_name,used_memory")
    assert ", sglang::scheduler, " in apps

    first = run.post_json("/generate", {"text": "Hi", "sampling_params": {"max_new_tokens": 5}})
    again = run.post_json("/generate", {"text": "Hi", "sampling_params": {"max_new_tokens": 5}})
    assert first["text"] == again["text"] and len(first["text"].split()) == 5
    completion = run.post_json("/v1/completions", {"prompt": "Hi", "max_tokens": 3})
    assert completion["choices"][0]["text"]

    os.killpg(run.pid, 15)
    assert run.wait_exit(10) == 0
    assert "Finished server process" in run.log()
    assert run.wait_for(lambda: not any(Path(f"/proc/{p}").exists() for p in kids), 10)
    assert _nvidia_smi(run, "--query-compute-apps=pid,process_name,used_memory") == ""


def test_unknown_flag_fails_like_argparse(launch) -> None:  # type: ignore[no-untyped-def]
    bad = scenarios.Scenario("bad-flag", "sglang", ("--model-path", "x", "--no-such"), "exit")
    run = launch(bad)
    assert run.wait_exit(20) == 2
    assert "launch_server.py: error: unrecognized arguments: --no-such" in run.log()


def test_multi_node_waits_for_every_node(launch) -> None:  # type: ignore[no-untyped-def]
    addr = f"127.0.0.1:{simrun.free_port()}"
    common = (*scenarios.TINY, "--tp", "4", "--nnodes", "2", "--dist-init-addr", addr)
    node0 = scenarios.Scenario("node0", "sglang", (*common, "--node-rank", "0"), "ready")
    node1 = scenarios.Scenario("node1", "sglang", (*common, "--node-rank", "1"), "ready")
    head = launch(node0)
    assert head.wait_text("Init torch distributed begin.", 20)
    assert head.wait_silence(1.0, 10), "alone, node 0 waits at the rendezvous, silently"
    assert "Init torch distributed ends" not in head.log() and head.alive()
    worker = launch(node1)
    assert head.wait_text(scenarios.FIRED, 30)
    assert worker.wait_for(lambda: worker.http_status("/health") == 200, 20)
    assert scenarios.FIRED not in worker.log()  # only node 0 serves and warms up
    assert sorted(cmdline(pid) for pid in children(worker.pid)) == [
        "sglang::scheduler_TP2",
        "sglang::scheduler_TP3",
    ]


def test_health_once_up_answers_after_sglangs_one_second_look_and_server_info_at_once(
    launch,  # type: ignore[no-untyped-def]
) -> None:
    """sglang 0.5's /health submits a one-token generation, then `await asyncio.sleep(1)`
    before it looks for the answer: a healthy server answers after a second, never sooner.
    /server_info asks the scheduler for its state: a round trip to it, no batch, no line."""
    run = launch(scenarios.by_name("sglang", "tiny-ready"), speed=1.0)
    assert run.wait_for(lambda: FIRED in run.log(), 30)
    for path, fastest, slowest in (("/health", 1.0, 3.0), ("/server_info", 0.0, 0.5)):
        batches = run.log().count("Prefill batch")
        t0 = time.monotonic()
        assert run.http_status(path, timeout_s=5) == 200
        took = time.monotonic() - t0
        assert fastest <= took < slowest, f"{path} took {took:.2f} s"
        generated = run.log().count("Prefill batch") - batches
        assert generated == (1 if path == "/health" else 0), path
