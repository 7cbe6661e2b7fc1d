"""A context above the model's on the simulated vLLM node, over a real sshd (issue 21).

The simulated vLLM derives max_model_len and refuses a longer one as vLLM 0.32 does
(sim/python/vllm/config/model.py): preflight must say so before anything is launched, and
`long_context: allow` must export VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 so the launch comes up.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Sshd, fab, sim_deployment, sim_env, ssh_host, stop_runs

pytestmark = pytest.mark.ssh


@pytest.fixture
def node(sshd: Sshd, tmp_path: Path, write_inventory: Callable[..., Path]) -> Iterator[Any]:
    made: list[Path] = []

    def make(**deployment: Any) -> Path:
        workdir = tmp_path / f"node-{len(made)}"
        host = ssh_host(sshd, workdir, "d")
        host["env"] = sim_env(FIREDUP_SIM_STATE=str(workdir / "sim-state"), FIREDUP_SIM_SPEED="4")
        spec = sim_deployment(engine="vllm", context_length=4096, **deployment)
        inv = write_inventory({"n": host}, {"d": spec})
        made.append(inv)
        return inv

    yield make
    for inv in made:
        stop_runs(inv)


def test_preflight_refuses_a_context_above_the_models_and_launches_nothing(
    node: Callable[..., Path],
) -> None:
    # Before: "PASS  context length  context_length 4096 > the target's 2048
    # (max_position_embeddings): vLLM adjusts the draft itself", then the launch died.
    inv = node()
    result = fab("preflight", "--host", "n", "--inventory", str(inv), timeout_s=120)
    out = result.stdout + result.stderr
    assert result.returncode != 0, out
    assert "FAIL  context length" in out
    assert "context_length 4096 > the model's 2048 (max_position_embeddings)" in out
    assert "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1" in out and "long_context: allow" in out
    deploy = fab("deploy", "--host", "n", "--inventory", str(inv), timeout_s=120)
    assert deploy.returncode == 6, deploy.stdout + deploy.stderr
    assert not list(inv.parent.glob("node-*/runs/*/server.log"))  # nothing was launched


def test_the_simulated_vllm_refuses_it_as_vllm_0_32_does_when_started_anyway(
    node: Callable[..., Path],
) -> None:
    inv = node()
    assert fab("start", "--host", "n", "--inventory", str(inv), timeout_s=60).returncode == 0
    wait = fab("wait", "--host", "n", "--inventory", str(inv), timeout_s=120)
    assert wait.returncode != 0
    assert "context_length" in wait.stdout + wait.stderr, wait.stdout + wait.stderr
    log = sorted(inv.parent.glob("node-*/runs/*/server.log"))[-1].read_text()
    assert "pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig" in log
    assert (
        "  Value error, User-specified max_model_len (4096) is greater than the derived "
        "max_model_len (max_position_embeddings=2048.0 or model_max_length=None in model's "
        "config.json). To allow overriding this maximum, set the env var "
        "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1."
    ) in log


def test_long_context_allow_exports_the_vllm_variable_and_the_launch_comes_up(
    node: Callable[..., Path],
) -> None:
    inv = node(long_context="allow")
    check = fab("preflight", "--host", "n", "--inventory", str(inv), timeout_s=120)
    assert "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 is exported" in check.stdout, check.stdout
    result = fab("deploy", "--host", "n", "--inventory", str(inv), timeout_s=180)
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    assert "READY" in out
    script = sorted(inv.parent.glob("node-*/runs/*/launch.sh"))[-1].read_text()
    assert "VLLM_ALLOW_LONG_MAX_MODEL_LEN" in script
