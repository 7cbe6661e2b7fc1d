"""After ready: the watch, restart by reason and notifications, as a deployment asks for them.

`restart: {on: failure, max: 3, backoff_s: 30}` restarts a server that died after ready of a
transient cause; `notify: {webhook: URL}` posts one JSON event per thing the watch saw;
`watch: {every_s: 10, generate_every_min: 0}` tunes the checks. Any of the three turns the
node-side watch on (docs/operations.md). Validated once at load, like the rest.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator


class FrozenModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Restart(FrozenModel):
    """When the watch starts a new run: `on: failure` (a death after ready, transient cause)."""

    on: Literal["failure", "never"] = "failure"
    max: int = Field(default=3, ge=1, le=100)  # failed attempts in a row before giving up
    backoff_s: float = Field(default=30.0, ge=0, le=3600)
    # A restarted run that served this long without dying starts the count from zero again.
    reset_after_s: float = Field(default=600.0, gt=0)


class Notify(FrozenModel):
    """Where the watch posts its events: a Slack-compatible incoming webhook (JSON, `text`)."""

    webhook: str = Field(min_length=8)
    events: tuple[
        Literal["ready", "failed", "restarted", "gave-up", "health-lost", "not-restarted"], ...
    ] = ("ready", "failed", "restarted", "gave-up", "health-lost", "not-restarted")

    @field_validator("webhook")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("the webhook must be an http:// or https:// URL")
        return value


class Watch(FrozenModel):
    """How the node-side watch looks at a ready server."""

    every_s: float = Field(default=10.0, ge=0.2, le=600)  # one check: procs, port, /health
    health_fails: int = Field(default=3, ge=1, le=100)  # failed /health in a row: health lost
    health_timeout_s: float = Field(default=5.0, gt=0, le=120)
    generate_every_min: float = Field(default=0.0, ge=0)  # 0: no real generation


def check_watchable(where: str, runtime: str, watched: bool) -> None:
    """The watch restarts the node's own processes (start.sh); a run in a container is
    started by the runtime's scripts, which the watch does not drive yet."""
    if watched and runtime != "python":
        raise ValueError(
            f"{where}: restart/notify/watch: a deployment in a container ({runtime}) is not "
            "watched yet; remove them or run it with the node's python"
        )
