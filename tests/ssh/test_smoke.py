"""One real request from the node to a server started on the simulated node (issue 7 §7)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from invoke import Context
from invoke.exceptions import Exit

from firedup.config.inventory import parse_inventory
from firedup.engine import Engine
from firedup.launch.runs import RunMeta, stop_run
from firedup.node.ssh import SshNode
from firedup.ops.deploy import plan_deploy, start_plan
from firedup.ops.smoke import smoke
from firedup.readiness.wait import WaitOptions, wait_ready
from tasks.smoke import smoke_test
from tests.conftest import Sshd, sim_deployment, ssh_host

pytestmark = pytest.mark.ssh


class Served:
    """A simulated server deployed over SSH and waited for; stopped by the fixture."""

    def __init__(self, sshd: Sshd, tmp: Path, deployment: dict[str, Any]) -> None:
        host = ssh_host(sshd, tmp / "node", "d")
        host["env"] = {**host["env"], "FIREDUP_SIM_SPEED": "4"}
        tmp.mkdir(parents=True, exist_ok=True)
        self.inventory_path = tmp / "hosts.yaml"
        data = {"hosts": {"n": host}, "deployments": {"d": deployment}}
        self.inventory_path.write_text(json.dumps(data))
        inventory = parse_inventory(data, self.inventory_path)
        self.spec = inventory.host("n")
        self.node = SshNode(self.spec)
        self.run: RunMeta = start_plan(
            self.node, plan_deploy(self.spec, inventory.deployment_for(self.spec))
        )
        try:
            wait_ready(self.node, self.run, WaitOptions(timeout_s=60, tick_s=0.5))
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        stop_run(self.node, self.run, grace_s=2)
        self.node.close()


@pytest.fixture
def serve(sshd: Sshd, tmp_path: Path) -> Iterator[Callable[..., Served]]:
    started: list[Served] = []

    def make(**deployment: Any) -> Served:
        served = Served(sshd, tmp_path / str(len(started)), sim_deployment(**deployment))
        started.append(served)
        return served

    yield make
    for served in started:
        served.close()


def test_sglang_answers_with_latency_and_tokens_per_second(serve: Callable[..., Served]) -> None:
    served = serve()
    result = smoke(served.node, served.run, max_new_tokens=16, python=served.spec.python)
    assert result.ok, result.error
    assert result.engine is Engine.SGLANG and result.http_status == 200
    assert result.completion_tokens == 16 and result.prompt_tokens == 6
    assert result.latency_s is not None and 0 < result.latency_s < 10
    assert result.tokens_per_s == pytest.approx(16 / result.latency_s)
    assert result.text and result.run_id == served.run.run_id
    # The request really reached the server: its access log has it, after the warmup's.
    log = Path(served.run.log_path).read_text()
    assert log.count('"POST /generate HTTP/1.1" 200') == 2


def test_vllm_answers_on_the_openai_route(serve: Callable[..., Served]) -> None:
    served = serve(engine="vllm")
    result = smoke(served.node, served.run, python=served.spec.python)
    assert result.ok, result.error
    assert result.completion_tokens == 32 and result.tokens_per_s is not None
    assert '"POST /v1/completions HTTP/1.1" 200' in Path(served.run.log_path).read_text()


def test_a_stopped_server_is_a_failed_smoke_and_a_nonzero_exit(
    serve: Callable[..., Served], capsys: pytest.CaptureFixture[str]
) -> None:
    served = serve()
    inventory = str(served.inventory_path)
    smoke_test(Context(), host="n", inventory=inventory, max_new_tokens=4)
    assert "n: smoke ok" in capsys.readouterr().out
    stop_run(served.node, served.run, grace_s=2)
    result = smoke(served.node, served.run, python=served.spec.python, timeout_s=5)
    assert not result.ok and "Connection refused" in result.error
    with pytest.raises(SystemExit) as exited:
        smoke_test(Context(), host="n", inventory=inventory, json_=True)
    assert exited.value.code == 9
    (entry,) = json.loads(capsys.readouterr().out)
    assert entry["host"] == "n" and entry["ok"] is False and "refused" in entry["error"]


def test_nothing_deployed_is_said_plainly(
    sshd: Sshd, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "hosts.yaml"
    host = ssh_host(sshd, tmp_path / "node", "d")
    path.write_text(json.dumps({"hosts": {"n": host}, "deployments": {"d": sim_deployment()}}))
    with pytest.raises((SystemExit, Exit)) as exited:
        smoke_test(Context(), host="n", inventory=str(path))
    assert getattr(exited.value, "code", None) == 9
    out = capsys.readouterr().out
    assert out.startswith("n: nothing was started here") and "fab deploy" in out
