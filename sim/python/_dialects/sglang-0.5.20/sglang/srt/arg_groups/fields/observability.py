"""Config fields of the `observability` namespace (simulated subset; names, aliases, defaults real)."""

from __future__ import annotations

from sglang.srt.arg_groups.arg_utils import A


class Observability:
    _NS_PATH = "observability"
    log_level: A[str, "The logging level of all loggers."] = "info"
    log_level_http: A[str | None, "The logging level of the HTTP server."] = None
    log_requests: A[bool, "Log the metadata, inputs and outputs of all requests."] = False
    enable_metrics: A[bool, "Enable log prometheus metrics."] = False
    decode_log_interval: A[int, "The log interval of decode batch."] = 40
