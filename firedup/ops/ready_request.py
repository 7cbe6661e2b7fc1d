"""Ready means it can serve: the opt-in last readiness step, one real generation.

The four signals (process alive, ready line, port ours, /health 200) say the server is up; a
model the engine cannot run may pass all four and die on its first request (vLLM on the CPU
with head_dim 16: "Unsupported CPU attention configuration"). With `ready_request: true` in
the deployment, a deploy, restart or wait sends one generation from the node (the smoke
request, firedup.ops.smoke) before calling the server READY; a failure is not READY, and the
log's own reason is given when the server dies of it. `fab smoke` stays the full check.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from firedup.config.deployment import Deployment
from firedup.config.inventory import HostSpec
from firedup.errors import ServerCrashedError
from firedup.launch.runs import RunMeta, is_alive
from firedup.logscan import Verdict
from firedup.node.base import Node
from firedup.ops.smoke import SmokeResult, smoke
from firedup.ops.status import scan_log

REQUEST_TIMEOUT_S = 60.0
DYING_S = 10.0  # after a failed request: how long a server may take to die of it
REASON = "first_request"


def confirm_serving(
    node: Node,
    host: HostSpec,
    deployment: Deployment,
    run: RunMeta,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> SmokeResult | None:
    """Send the readiness generation when the deployment asks for one; raise when it fails.
    Returns the request's result (None when not asked)."""
    if not deployment.ready_request:
        return None
    result = smoke(node, run, max_new_tokens=4, python=host.python, timeout_s=REQUEST_TIMEOUT_S)
    if result.ok:
        return result
    deadline = clock() + DYING_S
    while is_alive(node, run) and clock() < deadline:
        sleep(0.5)
    raise not_serving(node, run, result)


def not_serving(node: Node, run: RunMeta, result: SmokeResult) -> ServerCrashedError:
    """The failure, with the log's reason and excerpt when the server died of the request."""
    _probe, scan = scan_log(node, run)
    said = f"{run.host}: passed every readiness signal, but its first generation failed: " + (
        result.error
    )
    where = f"  log: {run.log_path}"
    if scan.verdict is Verdict.FAILED and scan.excerpt:
        excerpt = "\n".join(f"    {line}" for line in scan.excerpt)
        return ServerCrashedError(
            f"{said}\n{excerpt}\n{where}",
            hint=scan.hint,
            reason=scan.reason.value if scan.reason else REASON,
            excerpt=scan.excerpt,
            log_path=run.log_path,
        )
    return ServerCrashedError(
        f"{said}\n{where}",
        hint="the server is up but cannot generate: `fab logs` shows what it said",
        reason=REASON,
        log_path=run.log_path,
    )
