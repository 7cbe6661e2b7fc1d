"""A deployment behind a router: where the router is, what kind it is, how to drain.

firedup hands a worker to its router only once the four readiness signals agree, and takes it
out (then drains it) before any stop or restart (docs/router.md).
"""

from __future__ import annotations

from enum import StrEnum
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator


class RouterKind(StrEnum):
    SGLANG = "sglang"  # sglang-router / SGLang Model Gateway: POST/GET/DELETE /workers


class RouterSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str
    kind: RouterKind = RouterKind.SGLANG
    # How the router reaches this worker; default http://<node_address or address>:<port>.
    worker_url: str | None = None
    # After removal: wait for no request in flight at the worker, at most this long.
    drain_timeout_s: float = Field(default=60.0, gt=0)
    # After READY: wait for the router to list the worker as healthy, at most this long.
    join_timeout_s: float = Field(default=60.0, gt=0)

    @field_validator("url", "worker_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"expected an http(s):// URL with a host, got {value!r}")
        if parts.query or parts.fragment:
            raise ValueError(f"a router or worker URL takes no query or fragment: {value!r}")
        return value.rstrip("/")
