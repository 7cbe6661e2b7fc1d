"""A node whose host key changed (reinstalled, or someone in the middle) or is unknown: refused
before anything runs there, with one clear message and exit 3, under every key policy."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from firedup.errors import ConnectError
from tests.conftest import FAB, REPO
from tests.reliability import tally
from tests.reliability.helpers import Host

pytestmark = [pytest.mark.reliability, pytest.mark.ssh]


def other_key(tmp: Path) -> str:
    key = tmp / "other"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    return " ".join(key.with_suffix(".pub").read_text().split()[:2])


@pytest.mark.parametrize(
    ("known", "policy", "says"),
    [
        ("changed", "strict", "host key CHANGED"),
        ("changed", "accept-new", "host key CHANGED"),
        ("missing", "strict", "host key unknown"),
    ],
)
def test_a_changed_or_unknown_host_key_is_refused(
    make_host: Callable[..., Host], tmp_path: Path, known: str, policy: str, says: str
) -> None:
    host = make_host()
    known_hosts = tmp_path / f"known_hosts-{known}-{policy}"
    if known == "changed":
        known_hosts.write_text(f"[127.0.0.1]:{host.sshd.port} {other_key(tmp_path)}\n")
    data = yaml.safe_load(host.inventory_path.read_text())
    data["hosts"]["n"].update(known_hosts=str(known_hosts), host_key_policy=policy)
    host.inventory_path.write_text(yaml.safe_dump(data))
    before = known_hosts.read_text() if known_hosts.exists() else None
    tasks = (
        ("deploy", "status", "stop") if (known, policy) == ("changed", "strict") else ("deploy",)
    )
    for task in tasks:
        result = subprocess.run(
            [FAB, task, "--host", "n", "--inventory", str(host.inventory_path)],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
        tally.bad_input(f"host key {known} ({policy})")
        output = result.stdout + result.stderr
        assert result.returncode == ConnectError.exit_code, output
        assert says in output and "Traceback" not in output, output
    assert not host.workdir.exists()  # nothing ran on the node
    after = known_hosts.read_text() if known_hosts.exists() else None
    assert after == before or (before is None and policy == "strict" and after in (None, ""))


@pytest.mark.parametrize("trouble", ["full", "read-only"])
def test_a_known_hosts_that_cannot_take_the_new_key_says_so(
    make_host: Callable[..., Host], tmp_path: Path, trouble: str
) -> None:
    """Issue 28 §5: accept-new on a full or read-only disk is not "cannot connect"."""
    from tests.conftest import mounted_tmpfs

    disk = mounted_tmpfs(tmp_path / "disk", "1m")
    mount = next(disk)
    try:
        known_hosts = mount / "known_hosts"
        if trouble == "full":
            (mount / "filler").write_bytes(b"\0" * (1 << 20))
        else:
            subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True)
        host = make_host()
        data = yaml.safe_load(host.inventory_path.read_text())
        data["hosts"]["n"].update(known_hosts=str(known_hosts), host_key_policy="accept-new")
        host.inventory_path.write_text(yaml.safe_dump(data))
        result = host.cli("status")
        output = result.stdout + result.stderr
        assert result.returncode == ConnectError.exit_code, output
        assert "cannot connect" not in output, output
        assert f"cannot record the node's new host key in {known_hosts}" in output, output
        reason = "No space left on device" if trouble == "full" else "Read-only file system"
        assert reason in output, output
    finally:
        next(disk, None)
