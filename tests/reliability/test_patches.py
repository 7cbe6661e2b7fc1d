"""Patches under stress: a conflict on a node whose server runs (refused before anything is
stopped or written), and a link dropped at every step of an apply (the node always ends
either untouched or patched, the next sync finishes the job, and revert gives the original
bytes back)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from firedup.errors import DeployError
from firedup.patching import Mode, PatchStatus, sync_patches
from tests.conftest import REPO
from tests.reliability import tally
from tests.reliability.faultnode import FaultNode
from tests.reliability.helpers import Host, health, leftover_problems

pytestmark = [pytest.mark.reliability, pytest.mark.ssh]

PATCH = "kimi-k25-eagle3-hooks"
TARGET = "sglang/srt/models/kimi_k25.py"


def site_copy(where: Path) -> Path:
    """A private copy of the simulated sglang 0.5.9: patching never touches the checkout."""
    site = where / "site"
    shutil.copytree(REPO / "sim" / "python", site, ignore=shutil.ignore_patterns("__pycache__"))
    return site


def patched_host(make_host: Callable[..., Host], where: Path) -> tuple[Host, Path]:
    site = site_copy(where)
    return make_host({"patches": [PATCH]}, PYTHONPATH=str(site)), site / TARGET


def files(root: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_a_conflict_leaves_the_running_server_and_the_files_alone(
    make_host: Callable[..., Host], tmp_path: Path
) -> None:
    host, target = patched_host(make_host, tmp_path)
    first = host.deploy()
    assert first.ready, first.message
    # Someone edits the patched file on the node: the patch is neither applied nor applicable.
    text = target.read_text()
    assert "def set_eagle3_layers_to_capture" in text
    target.write_text(text.replace("if language_weights:", "if language_weights :"))
    site_before, data, live = files(target.parents[3]), host.data(), host.live_runs()
    result = host.cli("deploy", "--restart")
    tally.bad_input("patch conflict on a running node")
    assert result.returncode in (5, 6), result.stderr  # PatchError, or preflight's refusal
    assert "Traceback" not in result.stderr and TARGET in result.stderr, result.stderr
    assert "nothing was" in result.stderr, result.stderr  # "nothing was changed/launched"
    assert files(target.parents[3]) == site_before
    assert host.live_runs() == live  # the --restart never got to stop the running server
    assert first.status is not None and health(first.status.run.port) == 200
    assert not data.lost_in(host.data())
    assert not leftover_problems(host)


def test_a_drop_at_each_step_of_an_apply(make_host: Callable[..., Host], tmp_path: Path) -> None:
    host, target = patched_host(make_host, tmp_path / "baseline")
    original = target.read_bytes()
    counted = FaultNode(host.node(), host.sshd)
    sync_patches(counted, host.spec, host.deployment)
    patched = target.read_bytes()
    assert patched != original
    outcomes = []
    for k in range(len(counted.ops)):
        host, target = patched_host(make_host, tmp_path / f"drop{k}")
        node = FaultNode(host.node(), host.sshd, drop_before={k})
        try:
            report = sync_patches(node, host.spec, host.deployment)
            outcomes.append(f"{counted.ops[k]}: {'; '.join(report.lines())[:80]}")
        except DeployError as exc:
            outcomes.append(f"{counted.ops[k]}: {type(exc).__name__}: {exc.message[-300:]}")
        assert target.read_bytes() in (original, patched), outcomes[-1]
        again = sync_patches(host.node(), host.spec, host.deployment)
        assert [o.status for o in again.outcomes] in (
            [PatchStatus.APPLIED],
            [PatchStatus.ALREADY_APPLIED],
        ), (outcomes[-1], again.lines())
        assert target.read_bytes() == patched, outcomes[-1]
        reverted = sync_patches(host.node(), host.spec, host.deployment, mode=Mode.REVERT)
        assert [o.status for o in reverted.outcomes] == [PatchStatus.REVERTED], reverted.lines()
        assert target.read_bytes() == original, outcomes[-1]
        assert not leftover_problems(host)
    print("\n".join(outcomes))
