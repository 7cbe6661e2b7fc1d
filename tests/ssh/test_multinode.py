"""A deployment over two nodes, each in its own network namespace (issue 7 §6)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import (
    FAB,
    REPO,
    fab,
    free_port,
    session_members,
    sim_deployment,
    ssh_host,
    stop_runs,
    wait_until,
)

pytestmark = pytest.mark.ssh


def two_nodes(
    netns_hosts: Callable[..., list[Any]],
    tmp_path: Path,
    write_inventory: Callable[..., Path],
    **env: str,
) -> Path:
    a, b = netns_hosts(2)
    hosts = {"a": ssh_host(a, tmp_path / "a", "mn"), "b": ssh_host(b, tmp_path / "b", "mn")}
    for host in hosts.values():
        host["env"] = {**host["env"], **env}
    deployment = sim_deployment(tp=4, nodes=["a", "b"], dist_init_port=free_port())
    return write_inventory(hosts, {"mn": deployment})


def test_two_nodes_reach_ready_and_stop(
    netns_hosts: Callable[..., list[Any]], tmp_path: Path, write_inventory: Callable[..., Path]
) -> None:
    inv = two_nodes(netns_hosts, tmp_path, write_inventory)
    partial = fab("deploy", "--host", "a", "--inventory", str(inv))
    assert partial.returncode == 2 and "--host a,b" in partial.stderr

    script = fab("render", "--host", "b", "--inventory", str(inv)).stdout
    assert "--nnodes 2" in script and "--node-rank 1" in script and "--dist-init-addr 10." in script

    result = fab("deploy", "--host", "a,b", "--inventory", str(inv), timeout_s=180)
    assert result.returncode == 0, result.stderr
    assert "a,b: READY" in result.stdout
    pids = {n: int((tmp_path / n / "current" / "pid").read_text()) for n in "ab"}
    assert all(pid in session_members(pid) for pid in pids.values())
    status = json.loads(fab("status", "--host", "a,b", "--inventory", str(inv), "--json").stdout)
    assert {h["host"]: h["signals"]["alive"] for h in status["hosts"]} == {"a": True, "b": True}

    stop = fab("stop", "--host", "a,b", "--inventory", str(inv), "--grace", "2")
    assert stop.returncode == 0, stop.stderr
    assert all(session_members(pid) == [] for pid in pids.values())


def test_killing_rank_1_fails_the_deploy_naming_it(
    netns_hosts: Callable[..., list[Any]], tmp_path: Path, write_inventory: Callable[..., Path]
) -> None:
    inv = two_nodes(netns_hosts, tmp_path, write_inventory, FIREDUP_SIM_SPEED="0.2")
    deploy = subprocess.Popen(
        [FAB, "deploy", "--host", "a,b", "--inventory", str(inv)],
        cwd=REPO,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    try:
        pid_file = tmp_path / "b" / "current" / "pid"
        wait_until(lambda: pid_file.exists() and pid_file.read_text().strip(), 60, "rank 1")
        rank1 = int(pid_file.read_text())
        wait_until(lambda: len(session_members(rank1)) > 1, 30, "rank 1's schedulers")
        os.killpg(rank1, signal.SIGKILL)  # our own server's process group, by its pid
        _out, err = deploy.communicate(timeout=60)
        assert deploy.returncode == 8, err
        assert "rank 1 on b failed" in err
    finally:
        if deploy.poll() is None:
            deploy.kill()
        stop_runs(inv)


def test_vllm_two_nodes_reach_ready_with_rank_1_headless(
    netns_hosts: Callable[..., list[Any]], tmp_path: Path, write_inventory: Callable[..., Path]
) -> None:
    """vLLM's way (>= 0.12): `vllm serve` on every rank, --headless on rank 1, which runs
    its workers only and joins rank 0 at --master-addr:--master-port (issue 14)."""
    a, b = netns_hosts(2)
    hosts = {"a": ssh_host(a, tmp_path / "a", "mn"), "b": ssh_host(b, tmp_path / "b", "mn")}
    for host in hosts.values():
        host["env"] = {**host["env"], "FIREDUP_SIM_SPEED": "4"}
    deployment = {
        **sim_deployment(tp=4, nodes=["a", "b"], dist_init_port=free_port()),
        "engine": "vllm",
        "bind": "0.0.0.0",
    }
    inv = write_inventory(hosts, {"mn": deployment})
    try:
        result = fab("deploy", "--host", "a,b", "--inventory", str(inv), timeout_s=180)
        assert result.returncode == 0, result.stdout + result.stderr
        assert "a,b: READY" in result.stdout
        scripts = {n: next((tmp_path / n / "runs").glob("*/launch.sh")).read_text() for n in "ab"}
        for text in scripts.values():
            assert "-m vllm.entrypoints.cli.main serve" in text and "--nnodes 2" in text
        assert "--headless" in scripts["b"] and "--headless" not in scripts["a"]
        log_b = next((tmp_path / "b" / "runs").glob("*/server.log")).read_text()
        assert "headless multiproc executor, with head node address 10." in log_b
        assert "Starting vLLM server" not in log_b  # rank 1 serves no HTTP
        pids = {n: int((tmp_path / n / "current" / "pid").read_text()) for n in "ab"}
        titles = {Path(f"/proc/{p}/cmdline").read_bytes() for p in session_members(pids["b"])}
        assert any(t.startswith(b"VLLM::Worker_TP2") for t in titles)
        assert any(t.startswith(b"VLLM::Worker_TP3") for t in titles)
    finally:
        stop = fab("stop", "--host", "a,b", "--inventory", str(inv), "--grace", "2")
    assert stop.returncode == 0, stop.stderr
    assert all(session_members(pid) == [] for pid in pids.values())
