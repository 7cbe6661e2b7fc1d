"""Config fields of the `schedule` namespace (simulated subset; names, aliases, defaults real)."""

from __future__ import annotations

from sglang.srt.arg_groups.arg_utils import A


class Schedule:
    _NS_PATH = "schedule"
    mem_fraction_static: A[
        float | None, "The fraction of the memory used for static allocation."
    ] = None
    max_running_requests: A[int | None, "The maximum number of running requests."] = None
    max_total_tokens: A[int | None, "The maximum number of tokens in the memory pool."] = None
    chunked_prefill_size: A[int | None, "The maximum number of tokens in a chunk."] = None
    max_prefill_tokens: A[int, "The maximum number of tokens in a prefill batch."] = 16384
    page_size: A[int | None, "The number of tokens in a page."] = None
