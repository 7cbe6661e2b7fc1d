"""Stand-in for the vllm package on the simulated GPU node (stdlib only)."""

from vllm.version import __version__

__all__ = ["__version__"]
