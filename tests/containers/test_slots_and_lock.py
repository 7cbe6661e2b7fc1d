"""The lock and slots with the engine in a container (issue 27), as with a python on the node:
two slots of one node run two containers side by side; a busy slot, an overlapping GPU set or
a held lock refuses a deploy before any container is made."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Sshd, fab, stop_runs
from tests.containers.conftest import container_deployment, container_host, containers_of
from tests.containers.image import podman

pytestmark = pytest.mark.ssh


@pytest.fixture
def slots(image: str, sshd: Sshd, tmp_path: Path, write_inventory: Callable[..., Path]) -> Any:
    """Slots a, b, c of one node's workdir, GPUs 0,1 / 2,3 / 1,2 (c overlaps both)."""
    sets = {"a": [0, 1], "b": [2, 3], "c": [1, 2]}
    workdir = tmp_path / "node"
    hosts = {n: container_host(sshd, workdir, n, slot=n) for n in sets}
    deployments = {n: container_deployment(image, tp=2, gpus=g) for n, g in sets.items()}
    inv = write_inventory(hosts, deployments)
    yield inv, workdir
    stop_runs(inv)


def run_of(workdir: Path, slot: str) -> str:
    return (workdir / "slots" / slot / "current").resolve().name


def test_two_slots_run_two_containers_side_by_side_and_an_overlapping_third_is_refused(
    slots: tuple[Path, Path],
) -> None:
    inv, workdir = slots
    both = fab("deploy", "--host", "a,b", "--inventory", str(inv), timeout_s=240)
    assert both.returncode == 0, both.stdout + both.stderr
    names = {s: f"firedup-{run_of(workdir, s)}" for s in "ab"}
    assert len(set(names.values())) == 2 and set(names.values()) <= set(containers_of())
    for s, gpus in (("a", [0, 1]), ("b", [2, 3])):
        meta = json.loads((workdir / "slots" / s / "current" / "meta.json").read_text())
        assert meta["gpus"] == gpus and meta["runtime"] == "podman"
    out = fab("status", "--host", "a,b", "--inventory", str(inv), "--json").stdout
    hosts = {h["host"]: h for h in json.loads(out)["hosts"]}
    assert {h["state"] for h in hosts.values()} == {"ready"}
    assert {s: h["container"] for s, h in hosts.items()} == names
    assert hosts["a"]["port"] != hosts["b"]["port"]

    # Preflight checks the GPUs chosen for the container: c's overlap both live slots.
    third = fab("deploy", "--host", "c", "--inventory", str(inv), timeout_s=120)
    assert third.returncode == 6, third.stdout + third.stderr
    text = third.stdout + third.stderr
    assert "FAIL  slots" in text and "GPUs 1 are used by slot a" in text, text
    assert "GPUs 2 are used by slot b" in text, text
    assert not (workdir / "slots" / "c" / "current").exists()
    assert not any((workdir / "slots" / "c").glob("runs/*"))  # no run, so no container

    stop = fab("stop", "--host", "a,b", "--inventory", str(inv))
    assert stop.returncode == 0, stop.stdout + stop.stderr
    assert not set(names.values()) & set(containers_of())


def test_a_busy_slot_or_a_held_lock_refuses_a_second_deploy_as_with_a_python(
    slots: tuple[Path, Path],
) -> None:
    from firedup.config.inventory import load_inventory
    from firedup.node.lock import node_lock
    from firedup.node.ssh import SshNode

    inv, workdir = slots
    first = fab("deploy", "--host", "a", "--inventory", str(inv), timeout_s=180)
    assert first.returncode == 0, first.stdout + first.stderr
    name = f"firedup-{run_of(workdir, 'a')}"
    started = podman("inspect", "--format", "{{.State.StartedAt}}", name).stdout

    for step in ("start", "deploy"):  # onto the busy slot: refused, the container untouched
        again = fab(step, "--host", "a", "--inventory", str(inv), timeout_s=120)
        assert again.returncode == 7 and "still running" in again.stderr, again.stderr
        assert f"firedup-{run_of(workdir, 'a')}" == name
        assert podman("inspect", "--format", "{{.State.StartedAt}}", name).stdout == started

    spec = load_inventory(inv).host("b")
    node = SshNode(spec)
    try:
        with node_lock(node, spec, "deploy", detail="held by the test"):
            locked = fab("deploy", "--host", "b", "--inventory", str(inv), timeout_s=120)
    finally:
        node.close()
    assert locked.returncode == 11, locked.stdout + locked.stderr
    assert "held by the test" in locked.stderr
    assert not (workdir / "slots" / "b" / "current").exists()
    assert not any((workdir / "slots" / "b").glob("runs/*"))  # no run, so no container
