"""`--follow`: the raw log streamed to the operator beside the wait, never in its way.

The wait decides from what the node-side reader sends; the raw log is only for the eyes, so
it has its own channel and its own thread: on a slow link it may fall behind the server,
but readiness and a crash are never held up behind it. When the wait ends, so does this.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from firedup.errors import DeployError
from firedup.launch.runs import RunMeta
from firedup.node.base import Node
from firedup.readiness.logfeed import tail_argv

RETRY_S = 1.0  # after a dropped connection: the wait reconnects; we follow on the next try


class RawFollower:
    """Streams the run's log to `on_log` from a thread until `stop()`."""

    def __init__(self, node: Node, run: RunMeta, on_log: Callable[[bytes], None]) -> None:
        self.node = node
        self.run = run
        self.on_log = on_log
        self.offset = 0
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True, name="firedup-follow")

    def start(self) -> RawFollower:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(timeout=2.0)

    def _run(self) -> None:
        while not self.stopping.is_set():
            try:
                for chunk in self.node.stream(tail_argv(self.run, self.offset), timeout_s=0.5):
                    if self.stopping.is_set():
                        return
                    if chunk:
                        self.offset += len(chunk)
                        self.on_log(chunk)
                return  # the server's pid is gone and its log was shown to the end
            except DeployError:
                self.stopping.wait(RETRY_S)
