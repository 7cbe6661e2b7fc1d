"""The Router seam: what firedup needs of any router, and which class speaks to which kind.

A new kind of router (vLLM's router, LiteLLM, an nginx upstream file: docs/router.md) is one
class with these methods, added to `firedup.router.kinds.KINDS`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Worker:
    """One worker as the router sees it."""

    url: str
    healthy: bool
    ident: str = ""  # the router's own id for it, when it has one


class Router(Protocol):
    url: str

    def workers(self) -> list[Worker]:
        """Every worker the router lists now."""
        ...

    def add(self, worker_url: str) -> None:
        """Ask the router to take the worker (it may take a moment to list it)."""
        ...

    def remove(self, worker_url: str) -> None:
        """Ask the router to stop sending the worker requests (a no-op if it is not listed)."""
        ...

    def describe(self) -> str: ...


def listed(router: Router, worker_url: str) -> Worker | None:
    for worker in router.workers():
        if worker.url.rstrip("/") == worker_url.rstrip("/"):
            return worker
    return None
