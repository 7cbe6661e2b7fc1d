"""Config fields of the `memory` namespace (simulated subset; names, aliases, defaults real)."""

from __future__ import annotations

from sglang.srt.arg_groups.arg_utils import A


class Memory:
    _NS_PATH = "memory"
    disable_radix_cache: A[bool, "Disable RadixAttention for prefix caching."] = False
