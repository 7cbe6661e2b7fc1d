"""Drain: after the router dropped a worker, wait until the worker has no request in flight.

The count is read from the worker's own /metrics on its node: the running and waiting gauges
of firedup.releases.metrics (vLLM `vllm:num_requests_running` + `vllm:num_requests_waiting`;
SGLang `sglang:num_running_reqs` + `sglang:num_queue_reqs`, served with `--enable-metrics`).
Without /metrics the drain waits the grace period out (docs/router.md).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from firedup.engine import Engine
from firedup.errors import RouterError
from firedup.node.base import Node
from firedup.releases.metrics import NAMES
from firedup.releases.prometheus import parse_samples
from firedup.router.http import NoAnswer, node_http


def in_flight_of(metrics_text: str, engine: Engine) -> int | None:
    """Requests running or queued, summed over the engine's gauges (and their label sets);
    None when the text has none of them."""
    names = NAMES[engine]
    values = parse_samples(metrics_text, at=0.0).values
    seen = [values[n] for n in (names.running, names.waiting) if n in values]
    return round(sum(seen)) if seen else None


@dataclass(frozen=True)
class Drained:
    seconds: float
    in_flight: int | None  # what was still in flight at the end (None: /metrics had no count)

    def text(self) -> str:
        if self.in_flight is None:
            return f"no in-flight count on /metrics: waited the grace period ({self.seconds:.1f}s)"
        if self.in_flight:
            return f"{self.in_flight} request(s) still in flight after {self.seconds:.1f}s"
        return f"drained in {self.seconds:.1f}s"


def read_in_flight(node: Node, python: str, engine: Engine, worker_url: str) -> int | None:
    """In flight at the worker now: 0 when nothing listens there any more (a dead server
    serves nothing), None when it cannot be told."""
    try:
        answer = node_http(node, python, "GET", worker_url + "/metrics", timeout_s=5)
    except NoAnswer as exc:
        return 0 if exc.refused else None
    except RouterError:
        return None
    return in_flight_of(answer.body, engine) if answer.status == 200 else None


def drain(
    read: Callable[[], int | None],
    timeout_s: float,
    *,
    poll_s: float = 0.2,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    on_progress: Callable[[str], None] = lambda _m: None,
) -> Drained:
    """Poll `read` until it says 0, or the deadline; a worker without a count gets the whole
    grace period (its in-flight requests cannot be seen, only waited for)."""
    start = clock()
    last: int | None = None
    while True:
        last = read()
        elapsed = clock() - start
        if last == 0 or elapsed >= timeout_s:
            return Drained(elapsed, last)
        if last:
            on_progress(f"draining: {last} request(s) in flight")
        sleep(poll_s)
