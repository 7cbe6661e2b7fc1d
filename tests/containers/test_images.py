"""Images on the node: the derived image of `fab sync-patches`, and `fab pull` (issue 27)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import STORY_DEPLOYMENT, fab
from tests.containers.conftest import container_deployment
from tests.containers.image import podman

pytestmark = pytest.mark.ssh


def test_sync_patches_checks_builds_and_removes_the_derived_image(
    image: str, podman_inventory: Callable[..., Path]
) -> None:
    # A base of its own name: its derived image is this test's alone.
    base = image.replace("/sim-sglang:", "/sim-sglang-sync:")
    podman("tag", image, base)
    deployment = container_deployment(
        base, **{**STORY_DEPLOYMENT, "draft_context": "extend"}, patches=["kimi-k25-eagle3-hooks"]
    )
    inv = str(podman_inventory(deployment))
    podman("rmi", "-f", *derived_images(base), check=False)

    check = fab("sync-patches", "--host", "c", "--inventory", inv, "--check")
    assert check.returncode == 0, check.stderr
    assert "kimi-k25-eagle3-hooks (sglang 0.5.9): would apply" in check.stdout
    assert derived_images(base) == []  # a check builds nothing

    apply = fab("sync-patches", "--host", "c", "--inventory", inv, timeout_s=180)
    assert apply.returncode == 0, apply.stderr
    assert "applied" in apply.stdout
    [derived] = derived_images(base)
    again = fab("sync-patches", "--host", "c", "--inventory", inv, "--check")
    assert "kimi-k25-eagle3-hooks (sglang 0.5.9): already applied" in again.stdout, again.stderr

    revert = fab("sync-patches", "--host", "c", "--inventory", inv, "--revert")
    assert revert.returncode == 0, revert.stderr
    assert f"removed {derived}" in revert.stderr
    assert derived_images(base) == []
    podman("rmi", base)  # the tag only: the image stays


def derived_images(base: str) -> list[str]:
    slug = base.replace("/", "-").replace(":", "-")
    out = podman("images", "--format", "{{.Repository}}:{{.Tag}}").stdout.split()
    return [name for name in out if name.startswith(f"localhost/firedup-patched/{slug}:")]


def test_pull_is_a_phase_with_the_runtime_progress_and_a_clear_failure(
    image: str, podman_inventory: Callable[..., Path]
) -> None:
    unreachable = "localhost:1/firedup-test/none:1"  # no registry can be reached here
    inv = podman_inventory(container_deployment(unreachable))
    pulled = fab("pull", "--host", "c", "--inventory", str(inv), timeout_s=120)
    assert pulled.returncode == 6, pulled.stdout + pulled.stderr
    assert f"[c] pulling {unreachable} with podman" in pulled.stderr
    assert "connection refused" in pulled.stderr  # the runtime's own lines, as they came
    assert f"podman pull {unreachable} failed" in pulled.stderr
