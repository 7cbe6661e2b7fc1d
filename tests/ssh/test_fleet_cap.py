"""A fleet behind a bastion-like sshd: hosts connect a few at a time, so all of them answer.

The sshd here refuses every connection past 3 unauthenticated ones (`MaxStartups 3:100:3`; a
bastion's default 10:30:100 drops 30% past 10). `fab status` over 16 hosts on it: with
--max-parallel 2 every host answers; with no cap to speak of, some are refused (the control,
which shows the sshd really is that strict)."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import (
    SSHD,
    Sshd,
    accepts_ssh,
    fab,
    sim_deployment,
    ssh_host,
    start_sshd,
    stop_process,
    wait_until,
)

pytestmark = pytest.mark.ssh

HOSTS = 16


@pytest.fixture(scope="module")
def strict_sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    """conftest's sshd, restarted with a strict MaxStartups (sshd keeps a keyword's first
    value, so the line is replaced rather than added)."""
    root = tmp_path_factory.mktemp("bastion") / "sshd"
    proc, sshd = start_sshd(root)
    stop_process(proc)
    config = root / "sshd_config"
    config.write_text(config.read_text().replace("MaxStartups 50:30:100", "MaxStartups 3:100:3"))
    proc = subprocess.Popen([SSHD, "-D", "-f", str(config), "-E", str(root / "sshd.log")])
    try:
        wait_until(lambda: accepts_ssh(sshd.port), 10, "the strict sshd to accept")
        yield sshd
    finally:
        stop_process(proc)


def _status(inventory: Path, max_parallel: int) -> tuple[int, str]:
    names = ",".join(f"h{i}" for i in range(HOSTS))
    result = fab(
        "status", "--host", names, "--inventory", str(inventory),
        "--max-parallel", str(max_parallel), timeout_s=120,
    )  # fmt: skip
    return result.returncode, result.stdout + result.stderr


def test_a_capped_fleet_gets_every_answer(
    strict_sshd: Sshd, tmp_path: Path, write_inventory: Callable[..., Path]
) -> None:
    hosts = {f"h{i}": ssh_host(strict_sshd, tmp_path / f"h{i}", f"d{i}") for i in range(HOSTS)}
    inventory = write_inventory(hosts, {f"d{i}": sim_deployment() for i in range(HOSTS)})
    code, text = _status(inventory, 2)
    assert code == 0, text
    assert text.count("never-deployed") == HOSTS, text
    uncapped_code, uncapped = _status(inventory, 100)
    assert uncapped_code != 0 and "unreachable" in uncapped, (
        f"the control: this sshd should refuse some of {HOSTS} connecting at once\n{uncapped}"
    )
