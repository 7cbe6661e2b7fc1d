"""Issue 28 §3: what a user sends is data, even once the engine has logged it.

Over a real sshd, a simulated SGLang started with `--log-requests` logs every request's text
(`Receive: obj=GenerateReqInput(text='...')`, as sglang 0.5.9's request logger does). A user
whose prompt quotes an out-of-memory error must not make a healthy server read as failed:
`fab status` stays ready (text and JSON) and `fab wait` still finds it ready.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Callable

import pytest

from tests.reliability.helpers import Host

pytestmark = [pytest.mark.ssh]

PROMPT = (
    "My job died with: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. "
    "Then: Not enough memory. Please try to increase --mem-fraction-static. Why?"
)


def _generate(port: int, text: str) -> int:
    body = json.dumps({"text": text, "sampling_params": {"max_new_tokens": 4}}).encode()
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/generate", body, {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        return int(answer.status)


def test_a_logged_prompt_with_an_oom_message_keeps_a_healthy_server_ready(
    make_host: Callable[..., Host],
) -> None:
    host = make_host({"args": {"log-requests": True}})
    deployed = host.cli("deploy")
    assert deployed.returncode == 0, deployed.stdout + deployed.stderr
    assert _generate(host.deployment.port, PROMPT) == 200
    run_id = host.current()
    assert run_id is not None
    log = (host.workdir / "runs" / run_id / "server.log").read_text()
    assert "Receive: obj=GenerateReqInput(text=" in log and "CUDA out of memory" in log

    status = host.cli("status")
    assert status.returncode == 0, status.stdout + status.stderr
    assert " ready " in status.stdout and "failed" not in status.stdout, status.stdout
    as_json = host.cli("status", "--json")
    assert as_json.returncode == 0, as_json.stdout + as_json.stderr
    assert '"state": "ready"' in as_json.stdout and '"reason": null' in as_json.stdout
    waited = host.cli("wait", "--timeout", "30")
    assert waited.returncode == 0, waited.stdout + waited.stderr
