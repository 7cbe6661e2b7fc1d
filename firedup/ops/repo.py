"""Which commit of the inventory's repository a record names: read with git, running nothing
the repository's own config names (core.fsmonitor, hooks): the repository may not be the
operator's to trust (docs/security.md, "What an inventory is trusted with")."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from firedup.config.inventory import HostSpec


def inventory_commit(host: HostSpec) -> str:
    """The commit of the repository holding the host's inventory file (not of the cwd)."""
    return repo_commit(host.source.parent) if host.source else "unknown"


# The repository's own config must not make reading it run anything: core.fsmonitor (and
# the hook path) name commands `git status` runs; no pager, no lazy fetch, no prompt.
GIT_READ_ONLY = (
    "-c",
    "core.fsmonitor=",
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.untrackedCache=false",
    "--no-pager",
    "--no-optional-locks",
)


def repo_commit(path: Path | str) -> str:
    """The git checkout at path: `<sha>`, `<sha>+dirty` with uncommitted changes, or unknown.
    Nothing the repository's config names is run (GIT_READ_ONLY)."""
    try:
        sha = _git(path, "rev-parse", "HEAD")
        dirty = _git(path, "status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return f"{sha}+dirty" if dirty else sha or "unknown"


def _git(path: Path | str, *args: str) -> str:
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_NO_LAZY_FETCH": "1"}
    argv = ["git", *GIT_READ_ONLY, "-C", str(path), *args]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=5, check=True)
    return done.stdout.strip()
