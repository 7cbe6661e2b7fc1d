"""The chosen GPUs reach the container as CDI devices, over real podman (issue 27).

This machine has no GPU and no NVIDIA CDI spec, so the test writes a CDI spec of its own, of a
kind no one else uses (`container.cdi_kind`), whose devices 0-7 each put one variable into the
container: the container then shows which devices podman gave it. Removed after the test.
It names GPUs 0-3 of the simulated node's eight, and no `all` device, so preflight's CDI check
has devices to refuse."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml

from tests.conftest import fab, session_members
from tests.containers.conftest import container_deployment, containers_of

pytestmark = pytest.mark.ssh
CDI_DIR = Path("/var/run/cdi")  # one of the two directories podman 4 reads CDI specs from


@pytest.fixture
def cdi_kind() -> Iterator[str]:
    token = secrets.token_hex(4)
    kind = f"firedup.test/gpu{token}"
    spec = {
        "cdiVersion": "0.3.0",
        "kind": kind,
        "devices": [
            {"name": str(i), "containerEdits": {"env": [f"FIREDUP_TEST_GPU_{i}=1"]}}
            for i in range(4)  # GPUs 0-3, and no `all` device
        ],
    }
    created = not CDI_DIR.exists()
    try:
        CDI_DIR.mkdir(parents=True, exist_ok=True)
        path = CDI_DIR / f"firedup-test-{token}.yaml"
        path.write_text(yaml.safe_dump(spec))
    except OSError as exc:
        pytest.skip(f"cannot write a CDI spec here: {exc}")
    yield kind
    path.unlink(missing_ok=True)
    if created:
        with contextlib.suppress(OSError):  # only if empty: another test's spec stays
            CDI_DIR.rmdir()


def environ(pid: int) -> dict[str, str]:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    return dict(kv.split("=", 1) for kv in raw.decode().split("\0") if "=" in kv)


def engine_env(pid: int) -> dict[int, str]:
    """CUDA_VISIBLE_DEVICES as each process of the run's session sees it (the node's view)."""
    envs = {member: environ(member) for member in session_members(pid)}
    return {m: e["CUDA_VISIBLE_DEVICES"] for m, e in envs.items() if "CUDA_VISIBLE_DEVICES" in e}


def test_the_chosen_gpus_are_the_containers_devices_and_the_engine_sees_them_from_0(
    image: str, cdi_kind: str, podman_inventory: Callable[..., Path], tmp_path: Path
) -> None:
    deployment = container_deployment(image, tp=2, gpus=[1, 3])
    inv = podman_inventory(deployment, container={"gpus": "all", "cdi_kind": cdi_kind})
    preflight = fab("preflight", "--host", "c", "--inventory", str(inv), timeout_s=120)
    assert preflight.returncode == 0, preflight.stdout + preflight.stderr
    assert "GPUs 1,3" in preflight.stdout  # the node's GPUs, judged by the node's nvidia-smi
    assert f"{cdi_kind}=1,3 named by the node's CDI spec" in preflight.stdout

    deploy = fab("deploy", "--host", "c", "--inventory", str(inv), timeout_s=180)
    assert deploy.returncode == 0, deploy.stdout + deploy.stderr
    current = tmp_path / "node" / "current"
    name = f"firedup-{current.resolve().name}"
    launch = (current / "launch.sh").read_text()
    assert f"--device {cdi_kind}=1 --device {cdi_kind}=3" in launch
    # The container's first process has what the CDI devices put in: exactly 1 and 3.
    pid = int((current / "pid").read_text())
    given = sorted(k for k in environ(pid) if k.startswith("FIREDUP_TEST_GPU_"))
    assert given == ["FIREDUP_TEST_GPU_1", "FIREDUP_TEST_GPU_3"]
    # Inside, the two devices are CUDA's 0 and 1: the engine's processes say so.
    seen = engine_env(pid)
    assert seen and set(seen.values()) == {"0,1"}, seen
    status = json.loads(fab("status", "--host", "c", "--inventory", str(inv), "--json").stdout)
    assert status["hosts"][0]["run_gpus"] == [1, 3]  # the node's numbering, as the slots see it
    assert status["hosts"][0]["state"] == "ready"

    stop = fab("stop", "--host", "c", "--inventory", str(inv))
    assert stop.returncode == 0, stop.stdout + stop.stderr
    assert name not in containers_of()
    assert os.path.exists(current / "server.log")


def test_preflight_refuses_devices_the_nodes_cdi_spec_does_not_name(
    image: str, cdi_kind: str, podman_inventory: Callable[..., Path], tmp_path: Path
) -> None:
    cases = [
        ({"tp": 2, "gpus": [2, 5]}, cdi_kind, f"has no {cdi_kind}=5 (it names 0,1,2,3)"),
        ({}, cdi_kind, f"has no {cdi_kind}=all"),  # no selection: every GPU, `all`
        ({}, "firedup.test/nothing", "no CDI spec on the node names firedup.test/nothing"),
    ]
    for deployment, kind, said in cases:
        inv = podman_inventory(
            container_deployment(image, **deployment), container={"gpus": "all", "cdi_kind": kind}
        )
        result = fab("preflight", "--host", "c", "--inventory", str(inv), timeout_s=120)
        text = result.stdout + result.stderr
        assert result.returncode == 6 and "FAIL  cdi devices" in text and said in text, text
        assert "nvidia-ctk cdi generate" in text
    assert not (tmp_path / "node" / "runs").exists()  # preflight started nothing
