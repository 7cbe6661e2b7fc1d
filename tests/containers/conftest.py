"""Fixtures of the container suite: the locally built image and hosts that run it."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import SIM_MODELS, Sshd, free_port, ssh_host, stop_runs
from tests.containers.image import containers_conf, podman, sim_image


@pytest.fixture(scope="session")
def image() -> str:
    if shutil.which("podman") is None:
        pytest.skip("podman is not installed (scripts/test.sh installs it)")
    return sim_image()


def container_host(sshd: Sshd, workdir: Path, deployment: str, **overrides: Any) -> dict[str, Any]:
    """A host whose deployments run in podman; no GPU device is asked for (there is none)."""
    container = overrides.pop("container", {})
    entry = ssh_host(sshd, workdir, deployment, runtime="podman", **overrides)
    runtime_env = {"CONTAINERS_CONF": containers_conf(), **container.pop("runtime_env", {})}
    entry["container"] = {"gpus": "none", "runtime_env": runtime_env, **container}
    return entry


def container_deployment(image: str, model: str = "tiny-llama", **overrides: Any) -> dict[str, Any]:
    env = {"FIREDUP_SIM_SPEED": "4", **overrides.pop("env", {})}
    return {
        "engine": "sglang",
        "model": str(SIM_MODELS / model),
        "port": free_port(),
        "image": image,
        "env": env,
        **overrides,
    }


def containers_of(run_prefix: str = "firedup-") -> list[str]:
    """Names of every container (running or not) whose name starts with the prefix."""
    out = podman("ps", "-a", "--format", "{{.Names}}").stdout
    return [n for n in out.split() if n.startswith(run_prefix)]


@pytest.fixture
def podman_inventory(
    sshd: Sshd, tmp_path: Path, write_inventory: Callable[..., Path]
) -> Iterator[Callable[..., Path]]:
    """podman_inventory(deployment, **host) -> an inventory of one host `c`, deployment `d`."""
    made: list[Path] = []

    def make(deployment: dict[str, Any], **host: Any) -> Path:
        inv = write_inventory(
            {"c": container_host(sshd, tmp_path / "node", "d", **host)}, {"d": deployment}
        )
        made.append(inv)
        return inv

    yield make
    for inv in made:
        stop_runs(inv)
