"""Status and history of a run in a container (issue 27): the runtime, the container and the
image are shown; the image's id is recorded; a container removed by hand is not ready."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import jsonschema
import pytest

from tests.conftest import REPO, fab
from tests.containers.conftest import container_deployment, containers_of
from tests.containers.image import podman

pytestmark = pytest.mark.ssh
SCHEMA = json.loads((REPO / "docs" / "status.schema.json").read_text())


def status_of(inv: Path) -> dict[str, object]:
    out = fab("status", "--host", "c", "--inventory", str(inv), "--json")
    data = json.loads(out.stdout)
    jsonschema.validate(data, SCHEMA)
    host: dict[str, object] = data["hosts"][0]
    return host


def test_status_and_history_name_the_container_and_its_image_and_a_removed_one_is_not_ready(
    image: str, podman_inventory: Callable[..., Path], tmp_path: Path
) -> None:
    inv = podman_inventory(container_deployment(image))
    deploy = fab("deploy", "--host", "c", "--inventory", str(inv), timeout_s=180)
    assert deploy.returncode == 0, deploy.stdout + deploy.stderr
    run_id = (tmp_path / "node" / "current").resolve().name
    name = f"firedup-{run_id}"

    text = fab("status", "--host", "c", "--inventory", str(inv))
    assert text.returncode == 0, text.stdout + text.stderr
    assert f"podman container {name}, image {image}" in text.stdout
    host = status_of(inv)
    assert (host["state"], host["runtime"], host["container"], host["image"]) == (
        "ready",
        "podman",
        name,
        image,
    )

    # The history has the image and the id of the image the container was created from.
    image_id = podman("inspect", "--format", "{{.Image}}", name).stdout.strip()
    records = json.loads(fab("history", "--host", "c", "--inventory", str(inv), "--json").stdout)
    started = [r for r in records if r["run_id"] == run_id and r["action"] == "deploy"]
    assert started and all(r["image"] == image and r["image_id"] == image_id for r in started)
    assert all(r["runtime"] == "podman" for r in started)
    table = fab("history", "--host", "c", "--inventory", str(inv)).stdout
    assert "IMAGE" in table.splitlines()[0] and f"{image} ({image_id[:12]})" in table

    # Removed behind firedup's back: its processes went with it; the run is not ready.
    podman("rm", "-f", "-t", "0", name)
    gone = fab("status", "--host", "c", "--inventory", str(inv))
    assert gone.returncode == 0 and " exited " in gone.stdout, gone.stdout + gone.stderr
    host = status_of(inv)
    assert host["state"] == "exited" and host["signals"] == {**host["signals"], "alive": False}
    stop = fab("stop", "--host", "c", "--inventory", str(inv))
    assert stop.returncode == 0, stop.stdout + stop.stderr
    assert f"run {run_id} not-running" in stop.stdout  # there was nothing left to stop
    assert name not in containers_of()
    assert status_of(inv)["state"] in ("exited", "stopped")
