"""Issue 28 §1: an inventory another account planted is never acted on.

Another user (`fdother`) writes a `firedup.yaml` whose `ssh_config:` holds a ProxyCommand into
a world-writable directory above the operator's working directory. `firedup status` from below
it must run nothing and say why; named explicitly, or with the directory listed as safe, the
same file is used (which shows the planted command would have run).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO

pytestmark = [pytest.mark.ssh]

FIREDUP = str(REPO / ".venv" / "bin" / "firedup")


@pytest.fixture
def planted(other_user: str, tmp_path: Path) -> Iterator[tuple[Path, Path, Path]]:
    """(world-writable dir, the operator's working dir below it, the marker the planted
    ProxyCommand would create)."""
    shared = Path(tempfile.mkdtemp(prefix="firedup-ww-", dir="/tmp"))
    shared.chmod(0o777)  # world-writable, not sticky: anyone may put files here
    marker = shared / "proxycommand-ran"
    ssh_config = shared / "ssh_config"
    ssh_config.write_text(f"Host *\n  ProxyCommand touch {marker}\n")
    inventory = {
        "hosts": {
            "gpu": {
                "address": "gpu.example",
                "workdir": "/tmp/x",
                "deployment": "d",
                "ssh_config": str(ssh_config),
                "connect_timeout_s": 3,
            }
        },
        "deployments": {"d": {"engine": "sglang", "model": "/m"}},
    }
    (shared / "firedup.yaml").write_text(yaml.safe_dump(inventory))
    for path in (ssh_config, shared / "firedup.yaml"):
        shutil.chown(path, other_user)  # the other account's files, as if it wrote them
    work = shared / "project"
    work.mkdir(mode=0o700)  # the operator's own directory, below the planted file
    try:
        yield shared, work, marker
    finally:
        shutil.rmtree(shared, ignore_errors=True)


def _status(work: Path, home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("FIREDUP_")}
    environ.update(HOME=str(home), **env)
    return subprocess.run(
        [FIREDUP, "status", "--host", "gpu", *args],
        cwd=work,
        env=environ,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def test_a_planted_inventory_runs_nothing_and_says_why(
    planted: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    shared, work, marker = planted
    result = _status(work, tmp_path)
    err = result.stderr
    assert result.returncode == 2, result.stdout + err
    assert not marker.exists(), "the planted ProxyCommand ran"
    assert f"refusing the inventory {shared / 'firedup.yaml'}" in err, err
    assert "belongs to fdother" in err, err
    assert "--inventory" in err and "safe-directories" in err, err  # how to trust it


def test_a_planted_ssh_config_is_refused_even_from_a_named_inventory(
    planted: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    shared, work, marker = planted
    mine = tmp_path / "hosts.yaml"
    shutil.copy(shared / "firedup.yaml", mine)  # the operator's own copy, naming their file
    result = _status(work, tmp_path, "--inventory", str(mine))
    assert result.returncode == 2, result.stdout + result.stderr
    assert not marker.exists(), "the planted ProxyCommand ran"
    assert "refusing hosts.gpu.ssh_config" in result.stderr, result.stderr


def test_the_documented_opt_in_trusts_it(planted: tuple[Path, Path, Path], tmp_path: Path) -> None:
    shared, work, marker = planted
    # Control: the planted file is a working attack when trusted, so the refusal above is
    # what kept its command from running.
    result = _status(work, tmp_path, FIREDUP_SAFE_DIRECTORY=str(shared))
    assert marker.exists(), result.stdout + result.stderr
    assert "refusing" not in result.stderr
    marker.unlink()
    (tmp_path / ".config" / "firedup").mkdir(parents=True)
    (tmp_path / ".config" / "firedup" / "safe-directories").write_text(f"# mine\n{shared}\n")
    _status(work, tmp_path)
    assert marker.exists()
