"""Fixtures of the reliability suite: a private sshd whose connections we may kill, hosts on
it, and the session summary of what was injected (for the closing note)."""

from __future__ import annotations

import itertools
import json
import os
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Sshd, stop_process
from tests.reliability.helpers import Host, start_private_sshd
from tests.reliability.tally import COUNTS


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


def _tally_root(config: Any) -> Path:
    """The run's shared temp root: a worker's basetemp is popen-gwN inside the controller's."""
    base = Path(config._tmp_path_factory.getbasetemp())
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def pytest_sessionfinish(session: Any) -> None:
    """Under pytest-xdist each worker counts its own tests: hand the counts to the controller."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker and COUNTS:
        path = _tally_root(session.config) / f"reliability-tally-{worker}.json"
        path.write_text(json.dumps(dict(COUNTS)))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    counts = Counter(COUNTS)
    for path in _tally_root(terminalreporter.config).glob("reliability-tally-*.json"):
        counts.update(json.loads(path.read_text()))
    if not counts:
        return
    terminalreporter.section("reliability: faults injected and bad inputs tried")
    for key in ("faults injected", "bad inputs tried"):
        terminalreporter.write_line(f"{key}: {counts[key]}")
    for key in sorted(k for k in counts if ":" in k):
        terminalreporter.write_line(f"  {key}: {counts[key]}")
