"""What preflight reads from inside the image, and a crash inside a container (issue 27)."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from tests.conftest import Sshd, fab, sim_deployment, sim_env, ssh_host, stop_runs
from tests.containers.conftest import container_deployment, containers_of

pytestmark = pytest.mark.ssh


def test_a_flag_the_image_release_lacks_fails_preflight_read_inside_the_image(
    image: str, podman_inventory: Callable[..., Path], tmp_path: Path
) -> None:
    # The node's own python has sglang 0.5.23, which knows the flag; the image's 0.5.9 does not.
    env = sim_env(FIREDUP_SIM_SGLANG_VERSION="0.5.23")
    deployment = container_deployment(image, args={"cuda-graph-max-bs-prefill": 8})
    inv = podman_inventory(deployment, env=env)
    result = fab("deploy", "--host", "c", "--inventory", str(inv), timeout_s=120)
    out = result.stdout + result.stderr
    assert result.returncode == 6, out
    assert "FAIL  engine flags" in out and "sglang 0.5.9 would refuse the launch" in out
    assert "unrecognized --cuda-graph-max-bs-prefill (closest: --cuda-graph-max-bs)" in out
    assert "/usr/local/lib/python3" in out  # the engine found is the image's
    assert not list((tmp_path / "node").glob("runs/*/server.log"))  # nothing was launched


def test_a_missing_image_fails_preflight_naming_the_pull(
    image: str, podman_inventory: Callable[..., Path]
) -> None:
    absent = "localhost/firedup-test/never-built:1"
    inv = podman_inventory(container_deployment(absent))
    result = fab("preflight", "--host", "c", "--inventory", str(inv), timeout_s=60)
    out = result.stdout + result.stderr
    assert result.returncode == 6, out
    assert re.search(r"FAIL  image +localhost/firedup-test/never-built:1 is not on the node", out)
    assert f"`podman pull {absent}`" in out


def failure_line(out: str) -> str:
    """`server failed in phase P: REASON`, without the host and the timings."""
    found = re.search(r"server failed in phase \S+: \S+", out)
    assert found, out
    return found.group(0)


def test_a_crash_inside_the_container_is_reported_as_on_a_python_node(
    image: str,
    podman_inventory: Callable[..., Path],
    sshd: Sshd,
    tmp_path: Path,
) -> None:
    fault = {"FIREDUP_SIM_FAULT": "oom_load"}
    inv = podman_inventory(container_deployment(image, env=fault))
    in_container = fab("deploy", "--host", "c", "--inventory", str(inv), timeout_s=120)
    assert in_container.returncode == 8, in_container.stdout + in_container.stderr
    run_id = (tmp_path / "node" / "current").resolve().name

    python_host = ssh_host(sshd, tmp_path / "python-node", "d")
    python_host["env"] = {**python_host["env"], **fault, "FIREDUP_SIM_SPEED": "4"}
    plain = tmp_path / "python-node.yaml"
    plain.write_text(
        yaml.safe_dump({"hosts": {"p": python_host}, "deployments": {"d": sim_deployment()}})
    )
    try:
        on_python = fab("deploy", "--host", "p", "--inventory", str(plain), timeout_s=120)
    finally:
        stop_runs(plain)
    assert on_python.returncode == 8, on_python.stdout + on_python.stderr
    assert failure_line(in_container.stderr) == failure_line(on_python.stderr)
    assert "oom" in failure_line(in_container.stderr)
    assert "CUDA out of memory" in in_container.stderr  # the log line that proves it

    status = fab("status", "--host", "c", "--inventory", str(inv), "--json")
    assert status.stdout, status.stderr
    [host] = json.loads(status.stdout)["hosts"]
    assert host["state"] == "failed", status.stdout
    assert f"firedup-{run_id}" not in containers_of()  # the crashed container removed itself


@pytest.mark.parametrize("case", ["not installed", "daemon down"])
def test_a_runtime_that_cannot_answer_fails_preflight_saying_so(
    image: str, podman_inventory: Callable[..., Path], case: str
) -> None:
    if case == "not installed":  # podman out of the login shell's PATH
        host = {"container": {"gpus": "none", "runtime_env": {"PATH": "/nonexistent"}}}
        inv = podman_inventory(container_deployment(image), **host)
        expected = "FAIL  image           podman is not installed on the node"
    else:  # this machine has docker's CLI and no daemon
        if subprocess.run(["docker", "info"], capture_output=True).returncode == 0:
            pytest.skip("docker's daemon answers here")
        inv = podman_inventory(container_deployment(image, runtime="docker"))
        expected = "FAIL  image           docker cannot say whether"
    result = fab("preflight", "--host", "c", "--inventory", str(inv), timeout_s=60)
    out = result.stdout + result.stderr
    assert result.returncode == 6, out
    assert expected in out
    assert "pull" not in out.split("FAIL  image")[1].split("FAIL")[0]  # no pull would help
