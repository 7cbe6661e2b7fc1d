"""A deployment over two nodes, each in its own network namespace (issue 7 §6)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
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
SCHEMA = json.loads((REPO / "docs" / "status.schema.json").read_text())


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


def test_a_drop_on_rank_1_while_waiting_takes_its_lock_again(
    netns_hosts: Callable[..., list[Any]], tmp_path: Path, write_inventory: Callable[..., Path]
) -> None:
    """One deploy path for one node or many: the lock lives on each node's connection, and a
    rank >= 1 whose link drops during rank 0's wait gets its lock back, like rank 0 does."""
    from firedup.config.inventory import load_inventory
    from firedup.node.ssh import SshNode
    from firedup.ops.apply import deploy_ranks
    from firedup.ops.deploy import DeployOptions, plan_deploy, wait_options
    from firedup.ops.multinode import LOCK_RETAKEN, Rank
    from firedup.readiness.wait import WaitHooks
    from tests.reliability.helpers import kill_connections
    from tests.ssh.test_lock import holders

    a, b = netns_hosts(2)
    hosts = {"a": ssh_host(a, tmp_path / "a", "mn"), "b": ssh_host(b, tmp_path / "b", "mn")}
    deployment = sim_deployment(tp=4, nodes=["a", "b"], dist_init_port=free_port())
    inv_path = write_inventory(hosts, {"mn": deployment})
    inv = load_inventory(inv_path)
    specs = [inv.host(name) for name in ("a", "b")]
    ranks = [
        Rank(
            i, SshNode(spec), plan_deploy(spec, inv.deployment_for(spec), None, inv.placement(spec))
        )
        for i, spec in enumerate(specs)
    ]
    said: list[str] = []
    held: dict[str, list[int]] = {}

    def drop_rank_1_once(_status: object) -> None:
        if held:
            return
        held["before"] = holders(tmp_path / "b")
        kill_connections(b)  # b's sshd session processes: the operator's link to b is gone
        # Rank 0's wait goes on; rank 1's watcher reconnects and takes b's lock again.
        # (One holder: a holder's shell may fork for an instant while it starts.)
        held["after"] = wait_until(
            lambda: (
                (now := holders(tmp_path / "b"))
                and len(now) == 1
                and now[0] not in held["before"]
                and now
            ),
            20,
            "rank 1's lock to be taken again",
        )

    try:
        status = deploy_ranks(
            ranks,
            wait_options(inv.deployment_for(specs[0]), 120, 1.0),
            WaitHooks(on_status=drop_rank_1_once),
            how=DeployOptions(),
            on_progress=lambda host, message: said.append(f"{host}: {message}"),
        )
        assert status.ready
        assert len(held["before"]) == 1 and len(held["after"]) == 1
        assert f"b: {LOCK_RETAKEN}" in said
        assert holders(tmp_path / "b") == []  # and released when the deploy ended
    finally:
        for rank in ranks:
            rank.node.close()
        stop_runs(inv_path)


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
        both = _status(inv, "a,b")  # the headless rank: rank 0's state, never `starting`
        assert {n: h["state"] for n, h in both.items()} == {"a": "ready", "b": "ready"}
        alone = _status(inv, "b")["b"]
        assert alone["state"] == "follower" and alone["signals"]["listening"] is False
    finally:
        stop = fab("stop", "--host", "a,b", "--inventory", str(inv), "--grace", "2")
    assert stop.returncode == 0, stop.stderr
    assert all(session_members(pid) == [] for pid in pids.values())


def _status(inv: Path, selector: str) -> dict[str, dict[str, Any]]:
    result = fab("status", "--host", selector, "--inventory", str(inv), "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    jsonschema.validate(data, SCHEMA)
    return {h["host"]: h for h in data["hosts"]}


def _top_states(inv: Path) -> dict[str, str]:
    done = fab("top", "--once", "--json", "--interval", "0.2", "--inventory", str(inv))
    assert done.returncode == 0, done.stderr
    return {row["host"]: row["state"] for row in map(json.loads, done.stdout.splitlines())}


def test_status_shows_rank_1_as_rank_0s_follower_and_its_death(
    netns_hosts: Callable[..., list[Any]], tmp_path: Path, write_inventory: Callable[..., Path]
) -> None:
    """SGLang's rank >= 1 never logs ready (it serves a dummy /health only): its readiness is
    rank 0's. Status says so, never `starting`, and never shows a dead follower as ready."""
    inv = two_nodes(netns_hosts, tmp_path, write_inventory, FIREDUP_SIM_SPEED="4")
    try:
        deploy = fab("deploy", "--host", "a,b", "--inventory", str(inv), timeout_s=180)
        assert deploy.returncode == 0, deploy.stderr
        both = _status(inv, "a,b")
        assert both["a"]["state"] == "ready" and both["b"]["state"] == "ready"
        seen = {"nnodes": 2, "rank0_host": "a", "rank0_state": "ready", "down": [], "asked": 2}
        assert both["a"]["rank"] == {"node_rank": 0, **seen}
        assert both["b"]["rank"] == {"node_rank": 1, **seen}
        alone = _status(inv, "b")["b"]  # rank 0 not asked: a follower, naming its rank 0
        assert alone["state"] == "follower" and alone["signals"]["alive"] is True
        assert alone["rank"]["rank0_host"] == "a" and alone["rank"]["rank0_state"] is None
        assert alone["rank"]["asked"] == 1
        text = fab("status", "--host", "a", "--inventory", str(inv)).stdout
        assert "rank 0 of 2, only 1 of 2 ranks asked" in text  # b's death would not show
        text = fab("status", "--host", "b", "--inventory", str(inv)).stdout
        assert "follower" in text and "rank 1 of 2, readiness is rank 0's (a)" in text
        assert "starting" not in text
        assert _top_states(inv) == {"a": "ready", "b": "ready"}

        pid_b = int((tmp_path / "b" / "current" / "pid").read_text())
        os.killpg(pid_b, signal.SIGKILL)  # our own server's process group, by its pid
        wait_until(lambda: session_members(pid_b) == [], 30, "rank 1's processes to end")
        dead = _status(inv, "a,b")
        assert dead["b"]["state"] == "exited" and dead["b"]["signals"]["alive"] is False
        assert dead["a"]["state"] == "unhealthy"  # rank 0 serves alone: the deployment is broken
        assert dead["a"]["rank"]["down"] == [{"host": "b", "node_rank": 1, "state": "exited"}]
        text = fab("status", "--host", "a,b", "--inventory", str(inv)).stdout
        assert "rank 1 on b exited" in text
        assert _top_states(inv) == {"a": "unhealthy", "b": "exited"}
        assert _status(inv, "b")["b"]["state"] == "exited"  # alone too: never ready
    finally:
        pids = {n: int((tmp_path / n / "current" / "pid").read_text()) for n in "ab"}
        stop = fab("stop", "--host", "a,b", "--inventory", str(inv), "--grace", "2")
    assert stop.returncode == 0, stop.stderr
    assert all(session_members(pid) == [] for pid in pids.values())
