"""The fab namespace: thin adapters over the firedup core.

`ns` is built on first use (module __getattr__), so `firedup --version` and anything else that
imports this package without running a task do not load the task modules and the core.
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    if name != "ns":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from invoke import Collection

    from . import (
        containers,
        deploy,
        explain,
        history,
        lock,
        ops,
        patches,
        plan,
        restart,
        smoke,
        top,
    )

    ns = Collection()
    for task in (
        deploy.deploy,
        restart.restart,
        plan.preflight,
        plan.plan,
        deploy.render,
        deploy.start,
        deploy.wait,
        ops.status,
        top.top,
        ops.stop,
        ops.logs,
        patches.sync_patches,
        containers.pull,
        smoke.smoke_test,
        history.history,
        lock.unlock,
        explain.explain_log,
    ):
        ns.add_task(task)
    globals()["ns"] = ns
    return ns
