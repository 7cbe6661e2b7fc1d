"""The Kimi-K2.5 EAGLE-3 patch against the REAL sglang wheels, installed as a node's
site-packages (dist-info kept, as pip leaves it) and patched over a real sshd.

The wheels come from the package index once and are cached in $FIREDUP_WHEEL_CACHE (default
~/.cache/firedup-test-wheels); the tests skip, saying why, only when the index is unreachable.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

import pytest

from tests.conftest import NODE_PYTHON
from tests.ssh.test_patch_sync import (
    HOOKS,
    KIMI,
    KIMI_DIR,
    KIMI_REL,
    NodeFactory,
    class_methods,
    make_node,
    sync_cli,
    tree_digest,
)

pytestmark = [pytest.mark.ssh, pytest.mark.network]
__all__ = ["make_node"]  # the fixture, re-exported so pytest finds it here

DEFAULT_INDEX = "https://pypi.org/simple/"


def wheel_cache() -> Path:
    configured = os.environ.get("FIREDUP_WHEEL_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "firedup-test-wheels"


def _index_problem() -> str | None:
    """Why the package index cannot be reached, or None when it can."""
    index = os.environ.get("PIP_INDEX_URL") or DEFAULT_INDEX
    try:
        with urllib.request.urlopen(index.rstrip("/") + "/sglang/", timeout=15):
            return None
    except urllib.error.HTTPError:
        return None  # it answered: the index is reachable
    except OSError as exc:
        return f"{index}: {exc}"


def fetch_wheel(version: str) -> Path:
    cache = wheel_cache()
    found = sorted(cache.glob(f"sglang-{version}-*.whl"))
    if found:
        return found[0]
    cache.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
    argv += ["--disable-pip-version-check", "-q", "--retries", "2", "--timeout", "30"]
    argv += [f"sglang=={version}", "-d", str(cache)]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    found = sorted(cache.glob(f"sglang-{version}-*.whl"))
    if proc.returncode == 0 and found:
        return found[0]
    problem = _index_problem()
    if problem:
        pytest.skip(f"package index unreachable, cannot download sglang=={version}: {problem}")
    pytest.fail(f"pip download sglang=={version} failed with the index reachable:\n{proc.stderr}")


def install(wheel: Path, site: Path) -> zipfile.ZipFile:
    """Unpack a wheel as site-packages, dist-info included (that is what pip leaves)."""
    archive = zipfile.ZipFile(wheel)
    archive.extractall(site)
    return archive


@pytest.fixture(scope="module")
def wheel_059() -> Path:
    return fetch_wheel("0.5.9")


@pytest.fixture(scope="module")
def wheel_0510() -> Path:
    return fetch_wheel("0.5.10")


def test_kimi_patch_on_real_sglang_0_5_9(
    make_node: NodeFactory, wheel_059: Path, tmp_path: Path
) -> None:
    site = tmp_path / "site-packages"
    archive = install(wheel_059, site)
    wheel_files = {
        name: archive.read(name) for name in archive.namelist() if not name.endswith("/")
    }
    node = make_node(site)
    target = site / KIMI_REL
    assert not set(HOOKS) & class_methods(target)  # 0.5.9 really lacks them
    subprocess.run([NODE_PYTHON, "-m", "py_compile", str(target)], check=True)
    stale = list(target.parent.glob("__pycache__/kimi_k25.*.pyc"))
    assert stale

    check = sync_cli(node.inventory, "--check")
    assert check.returncode == 0, check.stderr
    assert f"node: {KIMI} (sglang 0.5.9): would apply" in check.stdout
    assert target.read_bytes() == wheel_files[KIMI_REL]

    applied = sync_cli(node.inventory)
    assert applied.returncode == 0, applied.stderr
    assert f"node: {KIMI} (sglang 0.5.9): applied" in applied.stdout
    assert set(HOOKS) <= class_methods(target)
    assert not any(p.exists() for p in stale)
    if shutil.which("patch"):  # GNU patch, strict (--fuzz=0), agrees byte for byte
        reference = tmp_path / "reference"
        (reference / KIMI_REL).parent.mkdir(parents=True)
        (reference / KIMI_REL).write_bytes(wheel_files[KIMI_REL])
        diff = (KIMI_DIR / f"{KIMI}.diff").read_bytes()
        gnu = subprocess.run(
            ["patch", "-p1", "--fuzz=0", "--batch"], input=diff, cwd=reference, capture_output=True
        )
        assert gnu.returncode == 0, gnu.stdout
        assert (reference / KIMI_REL).read_bytes() == target.read_bytes()

    before, inode = node.digest(), target.stat().st_ino
    again = sync_cli(node.inventory)
    assert again.returncode == 0, again.stderr
    assert f"node: {KIMI} (sglang 0.5.9): already applied" in again.stdout
    assert node.digest() == before and target.stat().st_ino == inode  # nothing uploaded

    reverted = sync_cli(node.inventory, "--revert")
    assert reverted.returncode == 0, reverted.stderr
    assert f"node: {KIMI} (sglang 0.5.9): reverted" in reverted.stdout
    on_disk = {str(p.relative_to(site)): p.read_bytes() for p in site.rglob("*") if p.is_file()}
    assert on_disk.keys() == wheel_files.keys()  # no leftovers: no .pyc, no temporary files
    assert on_disk == wheel_files  # byte-identical to the wheel


def test_real_sglang_0_5_10_does_not_need_it(
    make_node: NodeFactory, wheel_0510: Path, tmp_path: Path
) -> None:
    site = tmp_path / "site-packages"
    install(wheel_0510, site)
    assert set(HOOKS) <= class_methods(site / KIMI_REL)  # 0.5.10 ships them (PR #19689)
    node = make_node(site)
    before = tree_digest(site)
    check = sync_cli(node.inventory, "--check")
    assert check.returncode == 0, check.stderr
    assert (
        f"node: {KIMI} (sglang 0.5.10): not needed for this version: installed 0.5.10, "
        "patch is for >=0.5.9,<0.5.10"
    ) in check.stdout
    applied = sync_cli(node.inventory)
    assert applied.returncode == 0 and "not needed for this version" in applied.stdout
    assert tree_digest(site) == before
