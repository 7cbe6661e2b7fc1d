"""firedup as users install it: a wheel, installed (not editable) into a fresh virtualenv
outside the checkout, run from an unrelated directory holding its own inventory file.

The wheel is built with `pip wheel --no-deps` from a copy of the project's sources, and its
dependencies come from the package index, as they do for `pipx install firedup` (pip's cache
keeps reruns quick). The test skips, saying why, only when the index is unreachable.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import REPO, Sshd, sim_deployment, ssh_host, stop_runs
from tests.ssh.test_patch_real_wheel import _index_problem

pytestmark = [pytest.mark.slow, pytest.mark.ssh, pytest.mark.network]

# What a wheel is built from; everything else in the checkout (tests, sim, bench) stays out.
SOURCES = ["pyproject.toml", "setup.py", "README.md", "firedup", "tasks", "templates", "patches"]
JUNK = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build")


def _run(argv: list[str], cwd: Path, timeout_s: float = 600) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "FIREDUP_"))}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout_s,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip


def _pip_failed(what: str, proc: subprocess.CompletedProcess[str]) -> None:
    problem = _index_problem()
    if problem:
        pytest.skip(f"package index unreachable, cannot {what}: {problem}")
    pytest.fail(f"{what} failed with the index reachable:\n{proc.stdout}\n{proc.stderr}")


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv with the firedup wheel installed from the file, not the checkout."""
    root = tmp_path_factory.mktemp("wheel")
    src = root / "src"
    for name in SOURCES:
        path = REPO / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=JUNK)
        else:
            src.mkdir(exist_ok=True)
            shutil.copy2(path, src / name)
    build = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", "dist", str(src)]
    built = _run(build, root)
    wheels = sorted((root / "dist").glob("firedup-*.whl"))
    if built.returncode != 0 or not wheels:
        _pip_failed("build the wheel", built)
    # A venv without its own pip (ensurepip alone takes ~10 s): this pip installs into it.
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(root / "venv")], check=True)
    target = ["--python", str(root / "venv/bin/python"), "install", "-q", "--no-compile"]
    installed = _run([sys.executable, "-m", "pip", *target, str(wheels[0])], root)
    if installed.returncode != 0:
        _pip_failed("install the wheel's dependencies", installed)
    return root / "venv"


def _site_packages(venv: Path) -> Path:
    return next((venv / "lib").glob("python3*/site-packages"))


def test_the_wheel_carries_what_runs_and_no_top_level_tasks(venv: Path) -> None:
    site = _site_packages(venv)
    assert not (site / "tasks").exists(), "a top-level `tasks` package was installed"
    for shipped in [
        "firedup/tasks/cli.py",
        "firedup/templates/_prelude.sh.j2",
        "firedup/templates/sglang/launch.sh.j2",
        "firedup/templates/vllm/launch.sh.j2",
        "firedup/node/sh/current.sh",
        "firedup/node/sh/smoke_request.py",
        "firedup/preflight/node_facts.py",
        "firedup/patching/remote.py",
        "firedup/releases/conformance.json",
        "firedup/releases/argscan.py",
        "firedup/releases/argpkg.py",
        "firedup/releases/argreach.py",
        "firedup/patches/sglang/kimi-k25-eagle3-hooks/manifest.yaml",
    ]:
        assert (site / shipped).is_file(), f"{shipped} is not in the wheel"
    direct_url = next(site.glob("firedup-*.dist-info")) / "direct_url.json"
    assert not json.loads(direct_url.read_text()).get("dir_info", {}).get("editable")
    assert not list(site.glob("__editable__*firedup*"))


def test_from_an_unrelated_directory_list_render_and_deploy_to_ready(
    venv: Path, sshd: Sshd, tmp_path: Path, write_inventory: Callable[..., Path]
) -> None:
    ops = tmp_path / "ops"  # the user's own directory: no checkout anywhere above it
    ops.mkdir()
    inv = write_inventory(
        {"node": ssh_host(sshd, tmp_path / "node", "tiny")},
        {"tiny": sim_deployment(tp=2, ready_timeout_s=60)},
    ).rename(ops / "firedup.yaml")  # found by discovery: no --inventory anywhere below
    firedup = str(venv / "bin" / "firedup")

    where = _run([str(venv / "bin/python"), "-c", "import firedup; print(firedup.__file__)"], ops)
    assert where.stdout.startswith(str(_site_packages(venv))), where.stdout + where.stderr

    version = _run([firedup, "--version"], ops)
    assert version.returncode == 0 and version.stdout.startswith("firedup "), version.stderr
    listed = _run([firedup, "--list"], ops)
    assert listed.returncode == 0, listed.stderr
    assert all(task in listed.stdout for task in ("deploy", "render", "status", "stop"))
    completion = _run([firedup, "--print-completion-script", "bash"], ops)
    assert completion.returncode == 0 and "firedup" in completion.stdout

    rendered = _run([firedup, "render", "--host", "node"], ops)
    assert rendered.returncode == 0, rendered.stderr
    assert rendered.stdout.startswith("#!/usr/bin/env bash") and "sglang" in rendered.stdout

    try:
        deployed = _run([firedup, "deploy", "--host", "node"], ops, timeout_s=180)
        assert deployed.returncode == 0, deployed.stdout + deployed.stderr
        assert "node: READY" in deployed.stdout
        status = _run([firedup, "status", "--host", "node"], ops)
        assert status.returncode == 0 and "ready" in status.stdout, status.stderr
        history = _run([firedup, "history", "--host", "node", "--json"], ops)
        assert history.returncode == 0, history.stderr
        assert '"firedup_version"' in history.stdout
        stopped = _run([firedup, "stop", "--host", "node"], ops)
        assert stopped.returncode == 0, stopped.stderr
    finally:
        stop_runs(inv)
