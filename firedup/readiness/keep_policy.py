"""Restart by reason: which deaths a restart can cure, and when the watch gives up. Pure.

Runs on the node inside the watch (firedup.readiness.nodewatch): stdlib only, Python 3.8.
A death is *transient* when the same launch.sh can serve again: the process was killed, a
collective timed out (nccl), it crashed or hung, its health was lost, a worker died. It is
*deterministic* when the launch itself is wrong and would fail the same way: a bad flag, a
missing model, a context length the model refuses, code the model needs and the engine lacks,
a model or GPU the engine does not support, and an out-of-memory while loading (the same
weights do not fit the next time either). Restarting those only burns another launch.
"""

from __future__ import annotations

from typing import Any

# Reasons of the log classifier (firedup.logscan.Reason values) that no restart cures.
DETERMINISTIC = frozenset(
    {
        "bad_args",
        "model_not_found",
        "context_length",
        "missing_model_hook",
        "unsupported_model",
        "unsupported_gpu",
        "no_kernel_image",
        "port_in_use",  # another process holds the port: a new run would meet it too
    }
)
# Out of memory is deterministic only while loading: after ready it is a request's peak.
LOADING_ONLY = frozenset({"oom"})

# The watch's own reasons, for what the log cannot say.
HANG = "hang"  # alive, /health no longer answers in time
HEALTH_LOST = "health_lost"  # alive, /health answers with an error
WORKER_DIED = "worker_died"  # a process of the run's session is gone, the leader is not
PORT_LOST = "port_lost"  # alive, nobody of the run holds the port any more
GENERATE_FAILED = "generate_failed"  # the opt-in real generation failed twice in a row
NOT_READY = "not_ready"  # a restarted run did not become ready in its ready timeout


def deterministic(reason: str, ready_before: bool) -> bool:
    """Whether a death of `reason` would come again with the same launch."""
    if reason in DETERMINISTIC:
        return True
    return reason in LOADING_ONLY and not ready_before


def decide(
    reason: str, ready_before: bool, restart: dict[str, Any] | None, attempt: int
) -> tuple[str, str]:
    """(what to do, why) after a death: `restart`, `not-restarted` or `gave-up`.

    `attempt`: failed restart attempts in a row before this death (0: the first death)."""
    if not restart or restart.get("on") != "failure":
        return "not-restarted", "restart is off for this deployment"
    if deterministic(reason, ready_before):
        when = "" if ready_before else " before ready"
        return "not-restarted", (
            "%s%s is deterministic: the same launch would fail the same way; not restarted"
            % (reason, when)
        )
    limit = int(restart.get("max") or 0)
    if attempt >= limit:
        return "gave-up", "gave up after %d failed restart(s) in a row (max %d); last: %s" % (
            attempt,
            limit,
            reason,
        )
    return "restart", "%s: restarting (attempt %d of %d)" % (reason, attempt + 1, limit)


def reason_of_death(scan_reason: str | None, lost_workers: int, health_lost: bool) -> str:
    """The reason for a run whose leader is gone: the log's own word first, else what the
    watch saw before (a worker gone, health lost for good: not one failed look, which a
    death between two checks makes too), else a bare kill."""
    if scan_reason:
        return scan_reason
    if lost_workers:
        return WORKER_DIED
    if health_lost:
        return HEALTH_LOST
    return "killed"
