"""The `firedup` console script: the namespace of tasks/, run by Fabric's own program class.

Installed as `firedup.tasks.cli:main` (setup.py maps tasks/ into the firedup package), so
`pipx install firedup` gives the same tasks, options and config files (fabric.yaml, with its
`firedup:` section) as `fab` in the checkout, from any directory. Shell completion is invoke's:
`firedup --print-completion-script bash`.
"""

from __future__ import annotations

import sys
from typing import Any

from firedup import __version__


def main() -> None:
    if sys.argv[1:] in (["--version"], ["-V"]):
        # Answered before Fabric and paramiko load (most of the start-up): scripts and
        # monitoring ask this often, and need nothing else.
        print(f"firedup {__version__}")
        return
    program().run()


def program() -> Any:
    """Fabric's `Fab` with our namespace: no fabfile search, `firedup` as the binary name."""
    from fabric import Config, Executor
    from fabric.main import Fab

    from . import ns

    return Fab(
        name="firedup",
        version=__version__,
        namespace=ns,
        executor_class=Executor,
        config_class=Config,
        binary="firedup",
        binary_names=["firedup"],
    )
