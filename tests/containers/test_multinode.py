"""A deployment over two nodes whose ranks run in podman containers (issue 27): each node is
its own network namespace (tests/netns.py), each rank a container sharing its node's network."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import fab, free_port, session_members, stop_runs
from tests.containers.conftest import container_deployment, container_host, containers_of

pytestmark = pytest.mark.ssh


def test_two_nodes_in_containers_reach_ready_and_stop_leaving_no_container(
    image: str,
    netns_hosts: Callable[..., list[Any]],
    tmp_path: Path,
    write_inventory: Callable[..., Path],
) -> None:
    a, b = netns_hosts(2)
    hosts = {n: container_host(s, tmp_path / n, "mn") for n, s in (("a", a), ("b", b))}
    deployment = container_deployment(image, tp=4, nodes=["a", "b"], dist_init_port=free_port())
    inv = write_inventory(hosts, {"mn": deployment})
    try:
        script = fab("render", "--host", "b", "--inventory", str(inv)).stdout
        assert "podman run -d --rm --name firedup-" in script
        assert "--nnodes 2" in script and "--node-rank 1" in script

        result = fab("deploy", "--host", "a,b", "--inventory", str(inv), timeout_s=240)
        assert result.returncode == 0, result.stdout + result.stderr
        assert "a,b: READY" in result.stdout
        names = {n: f"firedup-{(tmp_path / n / 'current').resolve().name}" for n in "ab"}
        assert set(names.values()) <= set(containers_of())
        pids = {n: int((tmp_path / n / "current" / "pid").read_text()) for n in "ab"}
        assert all(pid in session_members(pid) for pid in pids.values())
        out = fab("status", "--host", "a,b", "--inventory", str(inv), "--json").stdout
        status = {h["host"]: h for h in json.loads(out)["hosts"]}
        assert status["a"]["state"] == "ready"
        assert {n: h["signals"]["alive"] for n, h in status.items()} == {"a": True, "b": True}
        assert {n: h["container"] for n, h in status.items()} == names

        stop = fab("stop", "--host", "a,b", "--inventory", str(inv), "--grace", "5")
        assert stop.returncode == 0, stop.stdout + stop.stderr
        assert not set(names.values()) & set(containers_of())
        assert all(session_members(pid) == [] for pid in pids.values())
    finally:
        stop_runs(inv)
