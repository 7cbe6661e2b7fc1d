"""Fixtures of the shared-node suite: a second, unprivileged local account (the other user),
a world-traversable place for workdirs (so that only firedup's own modes keep that user out),
a private sshd, and hosts on it.

The account is created once (`useradd --create-home`, idempotent) and never deleted: other
runs on this machine may use it at the same time. Everything it runs gets its own copy of
what it needs in a directory it can read; it never relies on the checkout being readable.
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Sshd, mounted_tmpfs, stop_process
from tests.reliability.helpers import Host, start_private_sshd

OTHER = "fdother"


def as_other(*argv: str) -> list[str]:
    """argv that runs `argv` as the other account (no login shell, no tty)."""
    return ["runuser", "-u", OTHER, "--", *argv]


@pytest.fixture(scope="session")
def other_user() -> str:
    """The other account; skips when this is not root (only root can create or become it)."""
    if os.geteuid() != 0:
        pytest.skip("the other-user tests need root (useradd, runuser)")
    if subprocess.run(["id", "-u", OTHER], capture_output=True).returncode != 0:
        # Two xdist workers may race here: the loser's useradd fails, the account exists.
        subprocess.run(["useradd", "--create-home", OTHER], capture_output=True)
    if subprocess.run(["id", "-u", OTHER], capture_output=True).returncode != 0:
        pytest.fail(f"could not create the account {OTHER}")
    return OTHER


@pytest.fixture(scope="session")
def open_root() -> Iterator[Path]:
    """A directory every user may enter and list (/tmp/firedup-sec-*, 0755): workdirs go
    inside it, so the other account is kept out by firedup's modes alone, not by pytest's
    0700 temp root or a checkout under /root."""
    root = Path(tempfile.mkdtemp(prefix="firedup-sec-", dir="/tmp"))
    root.chmod(0o755)
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def ssshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    proc, sshd = start_private_sshd(tmp_path_factory.mktemp("ssshd"))
    try:
        yield sshd
    finally:
        stop_process(proc)


@pytest.fixture
def make_host(ssshd: Sshd, open_root: Path, tmp_path: Path) -> Iterator[Callable[..., Host]]:
    """Hosts whose workdir is `<open_root>/<n>/node` (the parent 0755, the workdir not yet
    made: firedup creates it); every server they started is stopped at teardown."""
    hosts: list[Host] = []
    numbering = itertools.count()
    base = Path(tempfile.mkdtemp(prefix="t-", dir=open_root))
    base.chmod(0o755)

    def make(
        deployment: dict[str, Any] | None = None, workdir: Path | None = None, **env: str
    ) -> Host:
        n = next(numbering)
        parent = base / f"w{n}"
        parent.mkdir(mode=0o755)
        parent.chmod(0o755)
        workdir = workdir or parent / "node"
        host = Host.create(ssshd, tmp_path / f"h{n}", deployment, env, workdir)
        hosts.append(host)
        return host

    yield make
    for host in hosts:
        host.cleanup()
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 32 MiB tmpfs for a workdir (ask for it before `make_host`: teardown is in reverse,
    so servers are stopped while their run directories can still be read)."""
    yield from mounted_tmpfs(tmp_path / "disk", "32m")
