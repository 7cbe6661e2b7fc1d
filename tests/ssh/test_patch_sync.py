"""`fab sync-patches` over a real sshd, on a copy of the simulated node's stand-in sglang.

Every bad input must give one clear error and leave the node byte-for-byte unchanged: the
tests compare checksums (and modes) of the whole package tree and firedup's workdir.
"""

from __future__ import annotations

import ast
import difflib
import hashlib
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from firedup.config.inventory import load_inventory
from firedup.errors import CommandResult, PatchError
from firedup.node.base import Node
from firedup.node.ssh import ConnectionLostError, open_node
from firedup.patching import Mode, sync_patches
from tests.conftest import NODE_PYTHON, REPO, Sshd, ssh_host

pytestmark = pytest.mark.ssh

FAB = str(REPO / ".venv" / "bin" / "fab")
KIMI = "kimi-k25-eagle3-hooks"
KIMI_DIR = REPO / "patches" / "sglang" / KIMI
KIMI_REL = "sglang/srt/models/kimi_k25.py"
HOOKS = ("get_embed_and_head", "set_embed_and_head", "set_eagle3_layers_to_capture")


def sync_cli(inventory: Path, *flags: str, env: dict[str, str] | None = None) -> Any:
    """The real CLI; fab loads tasks/patches.py itself, the module tasks/__init__ registers."""
    argv = [FAB, "--search-root", str(REPO / "tasks"), "--collection", "patches"]
    return subprocess.run(
        [*argv, "sync-patches", "--host", "node", "--inventory", str(inventory), *flags],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
        stdin=subprocess.DEVNULL,
    )


# The node's lock file: an empty flock target that every locked operation leaves behind by
# design (removing a flock file races with the next taker); it holds no state of the node.
LOCK_BOOKKEEPING = {".lock", "lock.json"}


def tree_digest(*roots: Path) -> dict[str, str]:
    """sha256 and mode of every file under `roots`: "unchanged" means this is equal."""
    out: dict[str, str] = {}
    for root in roots:
        for path in sorted(root.rglob("*")):
            if path.is_file() and not (path.parent == root and path.name in LOCK_BOOKKEEPING):
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
                out[str(path)] = f"{digest} {path.stat().st_mode:o}"
    return out


def class_methods(path: Path, cls: str = "KimiK25ForConditionalGeneration") -> set[str]:
    """The methods `cls` defines, by parsing (the real module needs torch to import)."""
    tree = ast.parse(path.read_bytes())
    (node,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls]
    return {n.name for n in node.body if isinstance(n, ast.FunctionDef)}


def assert_one_clear_error(result: Any, *fragments: str, code: int = PatchError.exit_code) -> None:
    assert result.returncode == code, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    # Progress lines ("[node] ...") may come first; the error is one line (and a hint).
    lines = [ln for ln in result.stderr.strip().splitlines() if not ln.startswith("[node] ")]
    assert lines[0].startswith("firedup: "), result.stderr
    assert all(line.startswith("  hint: ") for line in lines[1:]), result.stderr
    for fragment in fragments:
        assert fragment in result.stderr, result.stderr


@contextmanager
def read_only(directory: Path) -> Iterator[None]:
    """Make `directory` unwritable for this user, root included (root ignores mode bits)."""
    if os.geteuid() != 0:
        mode = directory.stat().st_mode
        directory.chmod(0o555)
        try:
            yield
        finally:
            directory.chmod(mode)
        return
    if subprocess.run(["chattr", "+i", str(directory)], capture_output=True).returncode:
        pytest.skip("root without CAP_LINUX_IMMUTABLE: no way to make a directory read-only")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(directory)], check=True)


@dataclass
class PatchNode:
    """An inventory host over SSH whose python imports the packages in `site`."""

    inventory: Path
    site: Path
    workdir: Path

    @property
    def target(self) -> Path:
        return self.site / KIMI_REL

    def digest(self) -> dict[str, str]:
        return tree_digest(self.site, self.workdir)

    def python(self, *args: str) -> str:
        """Run the node's python with the host's env, as the server would (test's own view)."""
        env = {**os.environ, **load_inventory(self.inventory).host("node").env}
        proc = subprocess.run([NODE_PYTHON, *args], capture_output=True, text=True, env=env)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    def open(self) -> tuple[Node, Any, Any]:
        inv = load_inventory(self.inventory)
        spec = inv.host("node")
        return open_node(spec), spec, inv.deployment_for(spec)


NodeFactory = Callable[..., PatchNode]


@pytest.fixture
def make_node(sshd: Sshd, tmp_path: Path) -> NodeFactory:
    def make(site: Path, patches: Sequence[str] = (KIMI,), **env: str) -> PatchNode:
        workdir = tmp_path / "work"
        host = ssh_host(sshd, workdir, "kimi", env={"PYTHONPATH": str(site), **env})
        deployment = {"engine": "sglang", "model": "/models/kimi", "patches": list(patches)}
        inventory = tmp_path / "hosts.yaml"
        data = {"hosts": {"node": host}, "deployments": {"kimi": deployment}}
        inventory.write_text(yaml.safe_dump(data))
        return PatchNode(inventory, site, workdir)

    return make


@pytest.fixture
def sim_site(tmp_path: Path) -> Path:
    """A private copy of the sim's packages: patching must never dirty the checkout."""
    site = tmp_path / "site"
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(REPO / "sim" / "python", site, ignore=ignore)
    return site


def test_check_apply_again_revert_purging_both_caches(
    make_node: NodeFactory, sim_site: Path, tmp_path: Path
) -> None:
    prefix = tmp_path / "pycache-prefix"
    node = make_node(sim_site, PYTHONPYCACHEPREFIX=str(prefix))
    original = node.target.read_bytes()
    # Stale bytecode where the server reads it: the prefix (the host env sets it) and the
    # tree's own __pycache__ (a run without the prefix).
    node.python("-m", "py_compile", str(node.target))
    subprocess.run([NODE_PYTHON, "-m", "py_compile", str(node.target)], check=True)
    stale = [*prefix.rglob("kimi_k25.*.pyc"), *node.target.parent.glob("__pycache__/kimi_k25.*")]
    assert len(stale) == 2

    check = sync_cli(node.inventory, "--check")
    assert check.returncode == 0, check.stderr
    assert f"node: {KIMI} (sglang 0.5.9): would apply" in check.stdout
    assert node.target.read_bytes() == original and all(p.exists() for p in stale)

    applied = sync_cli(node.inventory)
    assert applied.returncode == 0, applied.stderr
    assert f"node: {KIMI} (sglang 0.5.9): applied" in applied.stdout
    assert set(HOOKS) <= class_methods(node.target)
    assert not any(p.exists() for p in stale)
    # The server's own view: the stand-in module imports and the class has the hooks.
    probe = "from sglang.srt.models.kimi_k25 import KimiK25ForConditionalGeneration as K\n"
    probe += f"print(all(hasattr(K, m) for m in {HOOKS!r}))"
    assert node.python("-c", probe).strip() == "True"

    before, inode = node.digest(), node.target.stat().st_ino
    again = sync_cli(node.inventory)
    assert again.returncode == 0, again.stderr
    assert f"node: {KIMI} (sglang 0.5.9): already applied" in again.stdout
    assert "wrote" not in again.stdout
    assert node.digest() == before and node.target.stat().st_ino == inode  # nothing uploaded

    reverted = sync_cli(node.inventory, "--revert")
    assert reverted.returncode == 0, reverted.stderr
    assert f"node: {KIMI} (sglang 0.5.9): reverted" in reverted.stdout
    assert node.target.read_bytes() == original
    assert not list(prefix.rglob("kimi_k25.*.pyc"))  # cached by the import above; purged


def test_sim_reporting_0_5_10_needs_no_patch(make_node: NodeFactory, sim_site: Path) -> None:
    node = make_node(sim_site, FIREDUP_SIM_SGLANG_VERSION="0.5.10")
    before = node.digest()
    for flags in (["--check"], []):
        result = sync_cli(node.inventory, *flags)
        assert result.returncode == 0, result.stderr
        assert (
            f"{KIMI} (sglang 0.5.10): not needed for this version: installed 0.5.10, "
            "patch is for >=0.5.9,<0.5.10"
        ) in result.stdout
    assert node.digest() == before


def test_conflict_names_file_and_hunk_and_changes_nothing(
    make_node: NodeFactory, sim_site: Path
) -> None:
    node = make_node(sim_site)
    text = node.target.read_text()
    node.target.write_text(text.replace("if language_weights:", "if language_weights :"))
    before = node.digest()
    check = sync_cli(node.inventory, "--check")
    assert check.returncode == PatchError.exit_code
    assert f"node: {KIMI} (sglang 0.5.9): conflicts: {KIMI_REL}: hunk #1 (@@ -772,5" in (
        check.stdout
    )
    apply = sync_cli(node.inventory)
    assert_one_clear_error(apply, "do not apply", "nothing was changed", f"{KIMI_REL}: hunk #1")
    assert node.digest() == before


def test_package_not_importable(make_node: NodeFactory, tmp_path: Path, sim_site: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    node = make_node(empty)
    before = tree_digest(sim_site, node.workdir)
    result = sync_cli(node.inventory)
    assert_one_clear_error(
        result, f"package 'sglang' is not importable by {NODE_PYTHON} on node", "hint: set"
    )
    assert tree_digest(sim_site, node.workdir) == before


def test_read_only_site_packages(make_node: NodeFactory, sim_site: Path) -> None:
    node = make_node(sim_site)
    before = node.digest()
    with read_only(node.target.parent):
        result = sync_cli(node.inventory)
    assert_one_clear_error(result, f"cannot patch {node.target}", "read-only")
    assert node.digest() == before


def copy_kimi_patch(root: Path) -> Path:
    folder = root / "sglang" / KIMI
    shutil.copytree(KIMI_DIR, folder)
    return folder


def test_bad_version_specifier(make_node: NodeFactory, sim_site: Path, tmp_path: Path) -> None:
    folder = copy_kimi_patch(tmp_path / "patches")
    manifest = folder / "manifest.yaml"
    manifest.write_text(manifest.read_text().replace(">=0.5.9,<0.5.10", ">=0.5.9,<<0.5.10"))
    node = make_node(sim_site)
    before = node.digest()
    result = sync_cli(node.inventory, env={"FIREDUP_PATCHES": str(tmp_path / "patches")})
    assert_one_clear_error(result, str(manifest), "versions: '>=0.5.9,<<0.5.10' is not a PEP 440")
    assert node.digest() == before


def test_missing_patch_file(make_node: NodeFactory, sim_site: Path, tmp_path: Path) -> None:
    folder = copy_kimi_patch(tmp_path / "patches")
    (folder / f"{KIMI}.diff").unlink()
    node = make_node(sim_site)
    before = node.digest()
    result = sync_cli(node.inventory, env={"FIREDUP_PATCHES": str(tmp_path / "patches")})
    assert_one_clear_error(result, f"diff: cannot read {folder / KIMI}.diff: No such file")
    missing = make_node(sim_site, patches=[KIMI, "no-such-patch"])
    result = sync_cli(missing.inventory)
    # A name that names no patch is a bad input, like an inventory error (issue 16 §9): exit 2.
    assert_one_clear_error(
        result, "patch 'no-such-patch' not found", f"known patches: {KIMI}", code=2
    )
    assert node.digest() == before


def test_check_and_revert_together_is_a_usage_error(make_node: NodeFactory, sim_site: Path) -> None:
    result = sync_cli(make_node(sim_site).inventory, "--check", "--revert")
    assert result.returncode == 2 and "exclude each other" in result.stderr


def test_revert_refuses_a_file_changed_since_patching(
    make_node: NodeFactory, sim_site: Path
) -> None:
    node = make_node(sim_site)
    assert sync_cli(node.inventory).returncode == 0
    with node.target.open("a") as fh:
        fh.write("# edited by hand after patching\n")
    before = node.digest()
    result = sync_cli(node.inventory, "--revert")
    assert_one_clear_error(result, f"{node.target} changed since firedup patched it")
    assert node.digest() == before


# --- failures in the middle of writing: fault injection on a real SSH node -------------


class FlakyNode:
    """A real SSH node whose upload of `fail_path` drops like a lost link.

    With `stay_dead`, every later operation fails too, so even the rollback cannot run.
    """

    def __init__(self, inner: Node, fail_path: str, *, stay_dead: bool = False) -> None:
        self.inner, self.fail_path, self.stay_dead = inner, fail_path, stay_dead
        self.failed = False
        self.puts: list[str] = []

    @property
    def name(self) -> str:
        return self.inner.name

    def _gate(self) -> None:
        if self.failed and self.stay_dead:
            raise ConnectionLostError(f"{self.name}: connection lost (injected)")

    def run(self, argv: Sequence[str], **kwargs: Any) -> CommandResult:
        self._gate()
        return self.inner.run(argv, **kwargs)

    def put(self, data: bytes, path: str, *, mode: int = 0o644) -> None:
        self._gate()
        if path == self.fail_path and not self.failed:
            self.failed = True
            raise ConnectionLostError(f"{self.name}: connection lost (injected)")
        self.puts.append(path)
        self.inner.put(data, path, mode=mode)

    def get(self, path: str) -> bytes:
        self._gate()
        return self.inner.get(path)

    def stream(self, argv: Sequence[str], *, timeout_s: float) -> Iterator[bytes]:
        return self.inner.stream(argv, timeout_s=timeout_s)

    def close(self) -> None:
        self.inner.close()


def two_file_patch(root: Path, site: Path) -> str:
    """The kimi patch plus a line appended to llama.py, so a failure can fall between."""
    folder = copy_kimi_patch(root)
    llama = site / "sglang" / "srt" / "models" / "llama.py"
    old = llama.read_text().splitlines(keepends=True)
    rel = "sglang/srt/models/llama.py"
    extra = difflib.unified_diff(old, [*old, "# firedup test\n"], f"a/{rel}", f"b/{rel}")
    with (folder / f"{KIMI}.diff").open("a") as fh:
        fh.writelines(extra)
    manifest = yaml.safe_load((folder / "manifest.yaml").read_text())
    manifest["files"].append(rel)
    (folder / "manifest.yaml").write_text(yaml.safe_dump(manifest))
    return str(llama)


def test_failure_mid_apply_restores_everything(
    make_node: NodeFactory, sim_site: Path, tmp_path: Path
) -> None:
    llama = two_file_patch(tmp_path / "patches", sim_site)
    node = make_node(sim_site)
    before = node.digest()
    inner, spec, deployment = node.open()
    flaky = FlakyNode(inner, llama)
    try:
        with pytest.raises(PatchError) as err:
            sync_patches(flaky, spec, deployment, patches_root=tmp_path / "patches")
    finally:
        flaky.close()
    assert str(node.target) in flaky.puts  # the first target really was written
    assert "connection lost (injected); every file was restored, nothing changed" in str(err.value)
    assert node.digest() == before  # targets, backups and record all as they were


def test_rollback_impossible_then_revert_recovers(
    make_node: NodeFactory, sim_site: Path, tmp_path: Path
) -> None:
    llama = two_file_patch(tmp_path / "patches", sim_site)
    node = make_node(sim_site)
    original = node.target.read_bytes()
    before_site = tree_digest(sim_site)
    inner, spec, deployment = node.open()
    flaky = FlakyNode(inner, llama, stay_dead=True)
    try:
        with pytest.raises(PatchError, match="ROLLBACK INCOMPLETE") as err:
            sync_patches(flaky, spec, deployment, patches_root=tmp_path / "patches")
    finally:
        flaky.close()
    assert "fab sync-patches --revert" in str(err.value)
    assert node.target.read_bytes() != original  # the link died with the file patched
    # The record was written before any target, so a later revert knows the originals.
    result = sync_cli(node.inventory, "--revert")
    assert result.returncode == 0, result.stderr
    assert tree_digest(sim_site) == before_site


def test_apply_through_the_core_reports_what_it_wrote(
    make_node: NodeFactory, sim_site: Path
) -> None:
    node = make_node(sim_site)
    inner, spec, deployment = node.open()
    seen: list[str] = []
    try:
        report = sync_patches(inner, spec, deployment, mode=Mode.APPLY, on_progress=seen.append)
    finally:
        inner.close()
    assert report.uploaded == (str(node.target),)
    assert report.record_path == f"{node.workdir}/patches/record.json"
    assert seen[0] == f"sglang 0.5.9 at {sim_site / 'sglang'}"
    record = yaml.safe_load((node.workdir / "patches" / "record.json").read_text())
    entry = record["files"][str(node.target)]
    assert entry["patches"] == [KIMI]
    backup = node.workdir / "patches" / "backups" / entry["original_sha256"]
    assert hashlib.sha256(backup.read_bytes()).hexdigest() == entry["original_sha256"]
    assert hashlib.sha256(node.target.read_bytes()).hexdigest() == entry["patched_sha256"]
    assert record["patches"][KIMI]["applied_by"].count("@") == 1
