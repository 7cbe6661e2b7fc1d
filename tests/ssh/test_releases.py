"""Launches rendered for the engine release on the node, and its flags checked before launch
(issue 14), over a real sshd on the simulated node."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Sshd, fab, sim_deployment, sim_env, ssh_host, stop_runs, wait_until

pytestmark = pytest.mark.ssh
SPEED = "4"


@pytest.fixture
def node(sshd: Sshd, tmp_path: Path, write_inventory: Callable[..., Path]) -> Iterator[Any]:
    """node(version, **deployment) -> the inventory of one host running that sglang release."""
    made: list[Path] = []

    def make(version: str, **deployment: Any) -> Path:
        workdir = tmp_path / f"node-{len(made)}"
        host = ssh_host(sshd, workdir, "d")
        host["env"] = sim_env(
            FIREDUP_SIM_STATE=str(workdir / "sim-state"),
            FIREDUP_SIM_SGLANG_VERSION=version,
            FIREDUP_SIM_SPEED=SPEED,
        )
        inv = write_inventory({"n": host}, {"d": sim_deployment(**deployment)})
        made.append(inv)
        return inv

    yield make
    for inv in made:
        stop_runs(inv)


def _script(inventory: Path) -> str:
    """The launch script of the node's newest run (run ids sort by time)."""
    launch = sorted(inventory.parent.glob("node-*/runs/*/launch.sh"))
    return launch[-1].read_text()


@pytest.mark.parametrize(
    ("version", "flag"),
    [("0.5.9", "--cuda-graph-max-bs"), ("0.5.23", "--cuda-graph-max-bs-decode")],
)
def test_cuda_graph_max_bs_reaches_ready_on_each_release(
    node: Callable[..., Path], version: str, flag: str
) -> None:
    inv = node(version, cuda_graph_max_bs=8)
    result = fab("deploy", "--host", "n", "--inventory", str(inv), timeout_s=180)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "READY" in result.stdout
    script = _script(inv)
    assert f"# For sglang {version}." in script
    assert f"  {flag} 8" in script
    log = sorted(inv.parent.glob("node-*/runs/*/server.log"))[-1].read_text()
    assert "bs=8 " in log  # the graphs were captured up to the knob, under either name


def test_a_flag_the_release_lacks_fails_preflight_naming_the_nearest(
    node: Callable[..., Path],
) -> None:
    inv = node("0.5.9", args={"cuda-graph-max-bs-prefill": 8, "mem-fraction-statik": 0.8})
    result = fab("deploy", "--host", "n", "--inventory", str(inv), timeout_s=120)
    assert result.returncode == 6, result.stdout + result.stderr
    out = result.stdout + result.stderr
    assert "FAIL  engine flags" in out and "sglang 0.5.9 would refuse the launch" in out
    assert "unrecognized --cuda-graph-max-bs-prefill (closest: --cuda-graph-max-bs)" in out
    assert "unrecognized --mem-fraction-statik (closest: --mem-fraction-static)" in out
    assert not list(inv.parent.glob("node-*/runs/*/server.log"))  # nothing was launched


def test_simulated_0_5_23_refuses_the_old_graph_flag_as_ambiguous(
    node: Callable[..., Path],
) -> None:
    # Rendered for the deployment's assumed 0.5.13 and started without preflight (fab start):
    # the simulated 0.5.23 says what the real one says and exits 2 before loading anything.
    inv = node("0.5.23", cuda_graph_max_bs=8, engine_version="0.5.13")
    start = fab("start", "--host", "n", "--inventory", str(inv), timeout_s=60)
    assert start.returncode == 0, start.stderr
    log = sorted(inv.parent.glob("node-*/runs/*/server.log"))[-1]
    expected = (
        "error: ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode, "
        "--cuda-graph-max-bs-prefill"
    )
    wait_until(lambda: expected in log.read_text(), 30, "the engine's argparse error")
    wait = fab("wait", "--host", "n", "--inventory", str(inv), timeout_s=60)
    assert wait.returncode != 0
    assert "bad_args" in wait.stdout + wait.stderr, wait.stdout + wait.stderr
    # A deploy asks the node first, renders for 0.5.23, and comes up.
    deploy = fab("deploy", "--host", "n", "--inventory", str(inv), timeout_s=180)
    assert deploy.returncode == 0, deploy.stdout + deploy.stderr
    assert "  --cuda-graph-max-bs-decode 8" in _script(inv)


def test_plan_labels_the_script_with_the_release_the_node_said_even_when_preflight_fails(
    node: Callable[..., Path],
) -> None:
    # Before: "# For sglang 0.5.23 (assumed, no node was asked)." right after the node said
    # 0.5.9, because a failed preflight kept the script rendered for the assumed release.
    inv = node("0.5.9", args={"mem-fraction-statik": 0.8})
    result = fab("plan", "--host", "n", "--inventory", str(inv), timeout_s=120)
    out = result.stdout + result.stderr
    assert "sglang 0.5.9 would refuse the launch" in out
    assert "# For sglang 0.5.9." in out, out
    assert "assumed, no node was asked" not in out
