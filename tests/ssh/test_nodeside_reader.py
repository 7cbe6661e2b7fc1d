"""The wait over real SSH when the log cannot be read on the node, and with --follow.

A node without python3 on the session's PATH: the reader's command finds nothing to run, so
the wait streams the log and reads it here, as before (ready and a crash both reported).
`fab deploy --follow` prints the server's own log lines while the decision comes from the
node-side reader."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from firedup.config.inventory import parse_inventory
from firedup.errors import ServerCrashedError
from firedup.launch.runs import stop_run
from firedup.node.ssh import SshNode
from firedup.ops.deploy import plan_deploy, start_plan
from firedup.ops.status import RunState, host_status
from firedup.readiness.wait import WaitOptions, wait_ready
from tests.conftest import (
    Sshd,
    fab,
    sim_deployment,
    ssh_host,
    start_sshd,
    stop_process,
    stop_runs,
)

pytestmark = pytest.mark.ssh


def _path_without_python(root: Path) -> str:
    """A directory with every command of /usr/bin and /bin but python3: a node's PATH."""
    tools = root / "bin"
    tools.mkdir(parents=True)
    for folder in ("/usr/bin", "/bin", "/usr/sbin", "/sbin"):
        for name in os.listdir(folder):
            if not name.startswith("python") and not (tools / name).exists():
                (tools / name).symlink_to(Path(folder) / name)
    return str(tools)


@pytest.fixture(scope="module")
def bare_sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    root = tmp_path_factory.mktemp("nopython")
    proc, sshd = start_sshd(root / "sshd", session_env={"PATH": _path_without_python(root)})
    try:
        yield sshd
    finally:
        stop_process(proc)


@pytest.mark.parametrize("case", ["ready", "crash"])
def test_a_node_without_python3_streams_the_log(bare_sshd: Sshd, tmp_path: Path, case: str) -> None:
    host = ssh_host(bare_sshd, tmp_path / "w", "d")
    host["env"] = {**host["env"], "FIREDUP_SIM_SPEED": "20"}
    if case == "crash":
        host["env"]["FIREDUP_SIM_FAULT"] = "oom_load"
    inv = parse_inventory(
        {"hosts": {"n": host}, "deployments": {"d": sim_deployment()}}, tmp_path / "h.yaml"
    )
    spec = inv.host("n")
    node = SshNode(spec)
    assert node.run(["bash", "-c", "command -v python3 || echo none"]).out.strip() == "none"
    run = start_plan(node, plan_deploy(spec, inv.deployment_for(spec)))
    try:
        if case == "ready":
            assert wait_ready(node, run, WaitOptions(timeout_s=30)).ready
        else:
            with pytest.raises(ServerCrashedError, match="phase loading_weights: oom"):
                wait_ready(node, run, WaitOptions(timeout_s=30))
        status = host_status(node, spec)  # the log read here too, as before
    finally:
        stop_run(node, run, grace_s=2)
        node.close()
    if case == "ready":
        assert status.state is RunState.READY and status.signals and status.signals.health == 200
    else:
        assert status.state is RunState.FAILED and status.scan and status.scan.reason
        assert status.scan.reason.value == "oom"


def test_follow_prints_the_servers_log(
    sshd: Sshd, tmp_path: Path, write_inventory: Callable[..., Path]
) -> None:
    host = ssh_host(sshd, tmp_path / "w", "d")
    host["env"] = {**host["env"], "FIREDUP_SIM_SPEED": "20"}
    inventory = write_inventory({"n": host}, {"d": sim_deployment()})
    try:
        result = fab("deploy", "--host", "n", "--inventory", str(inventory), "--follow")
        assert result.returncode == 0, result.stdout + result.stderr
        assert "Load weight begin" in result.stdout
        assert "READY" in result.stdout
    finally:
        stop_runs(inventory)
