"""Deployments whose engine runs in a podman container, over a real sshd (issue 27)."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import STORY_DEPLOYMENT, fab, session_members, wait_until
from tests.containers.conftest import container_deployment, containers_of
from tests.containers.image import SITE_PACKAGES, podman

pytestmark = pytest.mark.ssh
COUNT_HOOKS = "import sys; print(open(sys.argv[1]).read().count('def set_eagle3_layers_to'))"
KIMI_K25 = f"{SITE_PACKAGES}/sglang/srt/models/kimi_k25.py"


def port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def test_deploy_status_stop_in_a_container(
    image: str, podman_inventory: Callable[..., Path], tmp_path: Path
) -> None:
    deployment = container_deployment(image)
    inv = podman_inventory(deployment)
    deploy = fab("deploy", "--host", "c", "--inventory", str(inv), timeout_s=180)
    assert deploy.returncode == 0, deploy.stdout + deploy.stderr
    assert "c: READY" in deploy.stdout
    current = tmp_path / "node" / "current"
    run_id = current.resolve().name
    name = f"firedup-{run_id}"
    assert podman("inspect", "--format", "{{.State.Status}}", name).stdout.strip() == "running"
    meta = json.loads((current / "meta.json").read_text())
    assert meta["runtime"] == "podman"
    status = fab("status", "--host", "c", "--inventory", str(inv))
    assert status.returncode == 0, status.stderr
    assert "ready" in status.stdout
    stop = fab("stop", "--host", "c", "--inventory", str(inv))
    assert stop.returncode == 0, stop.stderr
    assert "stopped" in stop.stdout and "KILLed" not in stop.stdout  # TERM reached the engine
    assert name not in containers_of()
    wait_until(lambda: port_free(deployment["port"]), 10, "the port to be free")


def story(image: str, **overrides: object) -> dict[str, object]:
    """The story's v4 launch (the override, no patch) as a container deployment."""
    base = {**STORY_DEPLOYMENT, "draft_context": "extend", **overrides}
    return container_deployment(image, **base)


def test_the_story_patch_applied_inside_the_container(
    image: str, podman_inventory: Callable[..., Path], tmp_path: Path
) -> None:
    unpatched = podman_inventory(story(image))
    # Preflight would refuse it (model hooks); started as a runbook's single step, the image's
    # own sglang 0.5.9 crashes for real, inside the container.
    assert fab("start", "--host", "c", "--inventory", str(unpatched)).returncode == 0
    v4 = fab("wait", "--host", "c", "--inventory", str(unpatched), timeout_s=120)
    assert v4.returncode == 8, v4.stdout + v4.stderr
    assert "missing_model_hook" in v4.stderr and "set_eagle3_layers_to_capture" in v4.stderr

    deployment = story(image, patches=["kimi-k25-eagle3-hooks"])
    inv = podman_inventory(deployment)
    derived = launch_image_of(inv)
    podman("rmi", "-f", derived, check=False)  # built here, not found from an earlier session
    deploy = fab("deploy", "--host", "c", "--inventory", str(inv), timeout_s=240)
    assert deploy.returncode == 0, deploy.stdout + deploy.stderr
    assert "c: READY" in deploy.stdout
    assert f"building {derived}" in deploy.stderr
    assert "kimi-k25-eagle3-hooks (sglang 0.5.9): applied" in deploy.stderr
    run_id = (tmp_path / "node" / "current").resolve().name
    assert derived in (tmp_path / "node" / "current" / "launch.sh").read_text()
    # The running container holds the patched file; the base image is as it was.
    count = ["python3", "-c", COUNT_HOOKS, KIMI_K25]
    assert podman("exec", f"firedup-{run_id}", *count).stdout.strip() == "1"
    assert podman("run", "--rm", image, *count).stdout.strip() == "0"

    status = fab("status", "--host", "c", "--inventory", str(inv))
    assert status.returncode == 0 and "ready" in status.stdout, status.stdout + status.stderr
    again = fab("deploy", "--host", "c", "--inventory", str(inv), "--restart", timeout_s=180)
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"patched image {derived} is on the node" in again.stderr  # verified, not rebuilt
    stop = fab("stop", "--host", "c", "--inventory", str(inv))
    assert stop.returncode == 0, stop.stderr
    runs = {f"firedup-{r.name}" for r in (tmp_path / "node" / "runs").iterdir()}
    assert not runs & set(containers_of())  # no container of any of the node's runs is left
    wait_until(lambda: port_free(int(deployment["port"])), 10, "the port to be free")


def launch_image_of(inventory: Path) -> str:
    from firedup.config.inventory import load_inventory
    from firedup.ops.containers import launch_image

    inv = load_inventory(inventory)
    host = inv.select("c")[0]
    image = launch_image(host, inv.deployment_for(host))
    assert image is not None
    return image


def test_plan_of_a_container_host_shows_both_scripts_and_the_image_patches(
    image: str, podman_inventory: Callable[..., Path]
) -> None:
    inv = podman_inventory(story(image, patches=["kimi-k25-eagle3-hooks"]))
    plan = fab("plan", "--host", "c", "--inventory", str(inv), timeout_s=120)
    assert plan.returncode == 0, plan.stdout + plan.stderr
    assert "kimi-k25-eagle3-hooks (sglang 0.5.9): " in plan.stdout  # asked inside an image
    assert "podman run -d --rm --name firedup-" in plan.stdout
    assert (
        "--- engine.sh (" in plan.stdout and "exec python3 -m sglang.launch_server" in plan.stdout
    )


def test_secrets_reach_the_engine_but_not_the_runtime_or_the_node(
    image: str, podman_inventory: Callable[..., Path], tmp_path: Path
) -> None:
    secret = "hf_container_secret_value_31337"
    deployment = container_deployment(image, secrets={"HF_TOKEN": {"env": "H27_TOKEN"}})
    inv = podman_inventory(deployment)
    deploy = fab("deploy", "--host", "c", "--inventory", str(inv), env={"H27_TOKEN": secret})
    assert deploy.returncode == 0, deploy.stdout + deploy.stderr
    current = tmp_path / "node" / "current"
    name = f"firedup-{current.resolve().name}"
    pid = int((current / "pid").read_text())
    engines = [p for p in session_members(pid) if p != pid]
    assert any(secret.encode() in Path(f"/proc/{p}/environ").read_bytes() for p in engines)
    assert secret not in podman("inspect", name).stdout  # not in the container's config
    assert secret not in (current / "launch.sh").read_text()
    assert not (current / "secrets.env").exists()  # read once inside, then removed
