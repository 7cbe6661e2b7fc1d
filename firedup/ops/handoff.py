"""Router hand-off: a worker joins its router only once truly ready, and leaves (then drains)
before anything stops it. The router's URL and kind are the deployment's `router:`."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from firedup.config.deployment import Deployment
from firedup.config.inventory import HostSpec
from firedup.config.router import RouterSpec
from firedup.errors import RouterError
from firedup.launch.runs import current_run, is_alive
from firedup.node.base import Node
from firedup.router.base import Router, listed
from firedup.router.drain import Drained, drain, read_in_flight
from firedup.router.kinds import router_for

Progress = Callable[[str], None]
POLL_S = 0.2


def worker_url(host: HostSpec, deployment: Deployment) -> str:
    """How the router reaches this worker."""
    spec = deployment.router
    if spec is not None and spec.worker_url:
        return spec.worker_url
    address = host.node_address or host.address or "127.0.0.1"
    if ":" in address:  # an IPv6 literal
        address = f"[{address}]"
    return f"http://{address}:{deployment.port}"


@dataclass(frozen=True)
class Handoff:
    """One worker and its router, as one host entry sees them."""

    node: Node
    host: HostSpec
    deployment: Deployment
    spec: RouterSpec

    @property
    def worker(self) -> str:
        return worker_url(self.host, self.deployment)

    def router(self) -> Router:
        return router_for(self.node, self.host.python, self.spec)


def handoff_of(node: Node, host: HostSpec, deployment: Deployment) -> Handoff | None:
    if deployment.router is None:
        return None
    return Handoff(node, host, deployment, deployment.router)


def _until(
    done: Callable[[], bool], timeout_s: float, sleep: Callable[[float], None] = time.sleep
) -> bool:
    deadline = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() >= deadline:
            return False
        sleep(POLL_S)
    return True


def join(handoff: Handoff, on_progress: Progress) -> None:
    """After READY: add the worker, then wait until the router lists it healthy."""
    router, url = handoff.router(), handoff.worker
    router.add(url)

    def healthy() -> bool:
        worker = listed(router, url)
        return worker is not None and worker.healthy

    if not _until(healthy, handoff.spec.join_timeout_s):
        raise RouterError(
            f"{handoff.host.name}: {router.describe()} did not list worker {url} as healthy "
            f"within {handoff.spec.join_timeout_s:g}s",
            hint="the server is READY and keeps running; check that the router can reach "
            "the worker's address (router.worker_url in the inventory)",
        )
    on_progress(f"router: joined {router.describe()} as {url}")


def leave(handoff: Handoff, on_progress: Progress) -> Drained:
    """Before a stop: remove the worker, wait until the router no longer lists it, then wait
    for its in-flight requests to finish (or the drain grace to pass)."""
    router, url = handoff.router(), handoff.worker
    router.remove(url)
    if not _until(lambda: listed(router, url) is None, handoff.spec.join_timeout_s):
        raise RouterError(
            f"{handoff.host.name}: {router.describe()} still lists worker {url} "
            f"{handoff.spec.join_timeout_s:g}s after it was asked to remove it"
        )
    on_progress(f"router: left {router.describe()}")
    engine = handoff.deployment.engine
    drained = drain(
        lambda: read_in_flight(handoff.node, handoff.host.python, engine, url),
        handoff.spec.drain_timeout_s,
        on_progress=on_progress,
    )
    on_progress(f"router: {drained.text()}")
    return drained


def leave_before_restart(
    node: Node, host: HostSpec, deployment: Deployment, on_progress: Progress
) -> None:
    """A restart takes a serving worker out of its router (and drains it) before its server
    stops; a router that cannot be told stops the restart here, before anything stopped."""
    handoff = handoff_of(node, host, deployment)
    if handoff is None:
        return
    current = current_run(node, host)
    if current is not None and is_alive(node, current):
        leave(handoff, on_progress)


def serving_beside(router: Router, urls: set[str]) -> int:
    """Healthy workers the router lists besides `urls`."""
    mine = {url.rstrip("/") for url in urls}
    return sum(1 for w in router.workers() if w.healthy and w.url.rstrip("/") not in mine)
