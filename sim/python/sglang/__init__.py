"""Stand-in for the sglang package on the simulated GPU node (stdlib only)."""

from sglang.version import __version__

__all__ = ["__version__"]
