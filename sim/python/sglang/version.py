import os

# The simulated node reports sglang 0.5.9 unless FIREDUP_SIM_SGLANG_VERSION selects one of the
# other behaviours it knows: 0.5.10 (Kimi-K2.5 EAGLE-3 hooks, rank-death detection) and 0.5.23
# (renamed CUDA-graph capture lines).
SUPPORTED_VERSIONS = ("0.5.9", "0.5.10", "0.5.23")

__version__ = os.environ.get("FIREDUP_SIM_SGLANG_VERSION") or "0.5.9"
if __version__ not in SUPPORTED_VERSIONS:
    raise ImportError(
        f"FIREDUP_SIM_SGLANG_VERSION={__version__!r} is not simulated; "
        f"choose one of {', '.join(SUPPORTED_VERSIONS)}"
    )
__version_tuple__ = tuple(int(part) for part in __version__.split("."))
