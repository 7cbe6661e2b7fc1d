"""Stand-in for the sglang package on the simulated GPU node (stdlib only).

Releases that moved a module keep their version of it under sim/python/_dialects/<first
release>/: that directory goes first on this package's path, so `sglang.srt.server_args` (and
`sglang.srt.arg_groups`) resolve to the chosen release's files, as Python resolves a module
across the portions of a namespace package (`sglang.srt` has no __init__.py, as in the real
wheels).
"""

import os

from sglang.version import __version__, __version_tuple__

__all__ = ["__version__"]

_DIALECTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "_dialects")
if __version_tuple__ >= (0, 5, 20):
    __path__.insert(0, os.path.join(_DIALECTS, "sglang-0.5.20", "sglang"))
