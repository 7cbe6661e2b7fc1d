"""Fixtures of the reliability suite: a private sshd whose connections we may kill, hosts on
it, and the session summary of what was injected (for the closing note)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Sshd, stop_process
from tests.reliability.helpers import Host, start_private_sshd


@pytest.fixture(scope="session")
def rsshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    """Our own sshd: killing its per-connection processes can only hit this suite's links."""
    proc, sshd = start_private_sshd(tmp_path_factory.mktemp("rsshd"))
    try:
        yield sshd
    finally:
        stop_process(proc)


@pytest.fixture(scope="session")
def sshd_pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Sshd]]:
    """Three more private sshds, so drops can be injected on several links at once."""
    started = [start_private_sshd(tmp_path_factory.mktemp(f"pool{i}")) for i in range(3)]
    try:
        yield [sshd for _, sshd in started]
    finally:
        for proc, _ in started:
            stop_process(proc)


@pytest.fixture
def pool_hosts(sshd_pool: list[Sshd], tmp_path: Path) -> Iterator[list[Host]]:
    """One host on each sshd of the pool."""
    hosts = [Host.create(s, tmp_path / f"p{i}", None, {}) for i, s in enumerate(sshd_pool)]
    yield hosts
    for host in hosts:
        host.cleanup()


@pytest.fixture
def make_host(rsshd: Sshd, tmp_path: Path) -> Iterator[Callable[..., Host]]:
    """Hosts on the private sshd; every server they started is stopped at teardown."""
    hosts: list[Host] = []
    numbering = itertools.count()  # thread-safe: some tests make hosts from worker threads

    def make(
        deployment: dict[str, Any] | None = None, workdir: Path | None = None, **env: str
    ) -> Host:
        host = Host.create(rsshd, tmp_path / f"h{next(numbering)}", deployment, env, workdir)
        hosts.append(host)
        return host

    yield make
    for host in hosts:
        host.cleanup()
