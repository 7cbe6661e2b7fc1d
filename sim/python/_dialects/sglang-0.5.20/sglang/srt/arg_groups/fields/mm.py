"""Config fields of the `mm` namespace (simulated subset; names, aliases, defaults real)."""

from __future__ import annotations

from sglang.srt.arg_groups.arg_utils import A


class Mm:
    _NS_PATH = "mm"
    mm_enable_dp_encoder: A[bool, "Enable data parallelism for the multimodal encoder."] = False
