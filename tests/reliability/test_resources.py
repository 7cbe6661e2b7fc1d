"""A node short of something: a full disk in the workdir (a small tmpfs mounted by the test),
and `ss` missing, either from the host's environment or from the ssh session's PATH (as on
RHEL, where ss lives in /usr/sbin and a non-login ssh PATH lacks it)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from firedup.errors import DeployError, LockedError, NotReadyError, PreflightError
from tests.conftest import Sshd, mounted_tmpfs, stop_process
from tests.reliability import tally
from tests.reliability.faultnode import FaultNode
from tests.reliability.helpers import (
    Host,
    leftover_problems,
    start_private_sshd,
    told_state_problems,
)

pytestmark = [pytest.mark.reliability, pytest.mark.ssh]


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A tmpfs just over preflight's 1 GiB minimum (pages are only taken when written).

    Ask for it before `make_host`: fixtures are torn down in reverse, so the host's runs are
    stopped while their run directories can still be read, and only then is it unmounted."""
    yield from mounted_tmpfs(tmp_path / "disk", "1100m")


def fill(mount: Path) -> None:
    """Fill the filesystem to the last block (fallocate, then writes for the rest)."""
    filler = mount / "filler"
    free = os.statvfs(mount).f_bavail * os.statvfs(mount).f_frsize
    subprocess.run(["fallocate", "-l", str(max(free - 65536, 0)), str(filler)], check=False)
    with contextlib.suppress(OSError), filler.open("ab", buffering=0) as fh:
        while True:
            fh.write(b"\0" * 4096)
    tally.fault("disk full")


def test_a_full_disk_leaves_everything_as_it_was(
    small_disk: Path, make_host: Callable[..., Host]
) -> None:
    host = make_host(workdir=small_disk / "node")
    first = host.deploy()
    assert first.ready, first.message
    live, data, before = host.live_runs(), host.data(), set(host.runs())
    fill(small_disk)
    again = host.cli("deploy", "--restart")
    output = again.stdout + again.stderr
    assert again.returncode != 0 and output.startswith("firedup: "), output
    assert "Traceback" not in output, output
    assert host.live_runs() == live  # refused before the restart stopped anything
    assert set(host.runs()) == before
    assert not data.lost_in(host.data())
    (small_disk / "filler").unlink()
    assert not leftover_problems(host)


def test_a_full_disk_is_named(small_disk: Path, make_host: Callable[..., Host]) -> None:
    host = make_host(workdir=small_disk / "node")
    assert host.deploy().ready
    fill(small_disk)
    refused = host.cli("deploy", "--restart")
    output = refused.stdout + refused.stderr
    assert refused.returncode != LockedError.exit_code and "space" in output, output
    (small_disk / "filler").unlink()

    def fill_before_upload(name: str) -> None:
        if name == "put launch.sh":
            fill(small_disk)

    before = set(host.runs())
    node = FaultNode(host.node(), host.sshd, before_op=fill_before_upload)
    outcome = host.deploy(node, restart=True)
    (small_disk / "filler").unlink()
    assert isinstance(outcome.error, DeployError) and "space" in outcome.message, outcome.message
    assert not told_state_problems(host, outcome, before)
    assert host.live_runs() or "stopped" in outcome.message, outcome.message


def no_ss_dir(where: Path) -> Path:
    """A PATH directory with every command of this machine but `ss`."""
    path = where / "bin-without-ss"
    path.mkdir(exist_ok=True)
    for source in ("/usr/local/bin", "/usr/sbin", "/usr/bin"):
        for entry in os.scandir(source):
            link = path / entry.name
            if entry.name != "ss" and not link.exists():
                link.symlink_to(entry.path)
    return path


def test_ss_missing_from_the_hosts_environment(
    make_host: Callable[..., Host], tmp_path: Path
) -> None:
    bin_dir = no_ss_dir(tmp_path)
    sim = str(Path(__file__).resolve().parents[2] / "sim" / "bin")
    host = make_host(PATH=f"{sim}:{bin_dir}")
    result = host.cli("deploy")
    tally.bad_input("node without ss (host env)")
    output = result.stdout + result.stderr
    assert result.returncode == PreflightError.exit_code, output
    assert "ss is missing" in output and "Traceback" not in output, output
    assert not host.runs()  # nothing was launched
    assert not leftover_problems(host)


@pytest.fixture
def sshd_without_ss(tmp_path: Path) -> Iterator[Sshd]:
    proc, sshd = start_private_sshd(tmp_path / "sshd", PATH=str(no_ss_dir(tmp_path)))
    try:
        yield sshd
    finally:
        stop_process(proc)


def test_ss_missing_from_the_ssh_sessions_path(sshd_without_ss: Sshd, tmp_path: Path) -> None:
    host = Host.create(sshd_without_ss, tmp_path / "h", None, {})
    try:
        before = set(host.runs())
        started = time.monotonic()
        outcome = host.deploy(timeout_s=3)
        tally.bad_input("node without ss (ssh session PATH)")
        took = time.monotonic() - started
        assert not told_state_problems(host, outcome, before)
        # Either it copes (finds ss, or reads /proc) and is ready, or it says why not at once
        # (not as a not-ready at its deadline).
        said = "ss" in outcome.message and not isinstance(outcome.error, NotReadyError)
        assert outcome.ready or said, (took, outcome.message)
    finally:
        host.cleanup()
