"""Shared GPU nodes (issue 22), over real sshd on the simulated 8-GPU node: another user's job
holds GPUs 0-3; `gpus: auto` takes 4-7, `gpus: [0,1,2,3]` is refused naming that job; two
slots of one node serve side by side and a third whose GPUs overlap both is refused."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import (
    NODE_PYTHON,
    Sshd,
    fab,
    free_port,
    ssh_host,
    start_sshd,
    stop_process,
    stop_runs,
    wait_until,
)
from tests.sshreal.conftest import _ensure_user, users_lock

pytestmark = pytest.mark.ssh

OTHER_USER = "fdgpu"  # the colleague whose job holds GPUs 0-3
HELD_MIB = 61440


@pytest.fixture(scope="session")
def other_user() -> str:
    with users_lock():
        _ensure_user(OTHER_USER, "bash")
    return OTHER_USER


@pytest.fixture
def gpu_state() -> Iterator[Path]:
    """The simulated node's GPU state, written by every user's processes (as the driver's
    view is everyone's): a sticky world-writable directory outside root's private tmp."""
    path = Path(tempfile.mkdtemp(prefix="firedup-gpu-state-", dir="/tmp"))
    path.chmod(0o1777)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def as_user(
    user: str, module: list[str], env: dict[str, str], **popen: Any
) -> subprocess.Popen[bytes]:
    """`python -m MODULE...` as another account (setpriv execs: the pid is the program's)."""
    argv = ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups"]
    return subprocess.Popen(
        [*argv, NODE_PYTHON, "-m", *module], env=env, cwd="/", stderr=subprocess.DEVNULL, **popen
    )


def hold_gpus(shared: Path, state: Path, user: str, gpus: str) -> subprocess.Popen[bytes]:
    """Another user's process holding memory on `gpus`, started as that user (setpriv execs:
    the pid is the holder's)."""
    env = {"PYTHONPATH": str(shared / "python"), "FIREDUP_SIM_STATE": str(state)}
    argv = ["firedup_sim.hold", "--gpus", gpus, "--mib", str(HELD_MIB)]
    proc = as_user(user, argv, env, stdout=subprocess.PIPE)
    assert proc.stdout is not None
    line = proc.stdout.readline().decode()
    assert line.startswith("holding"), line
    return proc


def gpu_host(sshd: Sshd, root: Path, state: Path, deployment: str, **extra: Any) -> dict[str, Any]:
    host = ssh_host(sshd, root, deployment, **extra)
    host["env"].update(FIREDUP_SIM_STATE=str(state), FIREDUP_SIM_SPEED="1")
    return host


def tp4(**extra: Any) -> dict[str, Any]:
    from tests.conftest import SIM_MODELS

    return {
        "engine": "sglang",
        "model": str(SIM_MODELS / "tiny-llama"),
        "port": free_port(),
        "tp": 4,
        "ready_timeout_s": 90,
        **extra,
    }


def node_gpus_of(state: Path, shared: Path, sid: int) -> set[int]:
    """Which node GPUs the processes of session `sid` hold, as the node's nvidia-smi says."""
    out = subprocess.run(
        [
            str(shared / "bin" / "nvidia-smi"),
            "--query-compute-apps=pid,gpu_uuid",
            "--format=csv,noheader,nounits",
        ],
        env={"PYTHONPATH": str(shared / "python"), "FIREDUP_SIM_STATE": str(state)},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    held = set()
    for line in out.splitlines():
        pid, uuid = (c.strip() for c in line.split(","))
        try:
            stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(stat[3]) == sid:
            held.add(int(uuid[-12:], 16))
    return held


def meta_of(workdir: Path) -> dict[str, Any]:
    meta: dict[str, Any] = json.loads((workdir / "current" / "meta.json").read_text())
    return meta


@pytest.fixture
def busy_node(
    sshd: Sshd, shared_dir: Path, other_user: str, gpu_state: Path
) -> Iterator[subprocess.Popen[bytes]]:
    holder = hold_gpus(shared_dir, gpu_state, other_user, "0,1,2,3")
    yield holder
    stop_process(holder)


def test_auto_takes_the_free_gpus_and_a_listed_busy_set_names_the_job(
    sshd: Sshd,
    tmp_path: Path,
    gpu_state: Path,
    shared_dir: Path,
    busy_node: subprocess.Popen[bytes],
    write_inventory: Callable[..., Path],
) -> None:
    workdir = tmp_path / "node"
    hosts = {
        "auto": gpu_host(sshd, workdir, gpu_state, "auto", slot="auto"),
        "pinned": gpu_host(sshd, workdir, gpu_state, "pinned", slot="pinned"),
    }
    inv = write_inventory(hosts, {"auto": tp4(gpus="auto"), "pinned": tp4(gpus=[0, 1, 2, 3])})
    try:
        pinned = fab("deploy", "--host", "pinned", "--inventory", str(inv))
        assert pinned.returncode == 6, pinned.stdout + pinned.stderr
        text = pinned.stdout + pinned.stderr
        assert "FAIL  gpu users" in text, text
        assert f"pid {busy_node.pid}" in text and f"user {OTHER_USER}" in text, text
        assert not (workdir / "slots" / "pinned" / "current").exists()  # nothing launched

        auto = fab("deploy", "--host", "auto", "--inventory", str(inv), timeout_s=150)
        assert auto.returncode == 0, auto.stdout + auto.stderr
        assert "GPUs 4,5,6,7 chosen" in auto.stdout + auto.stderr
        meta = meta_of(workdir / "slots" / "auto")
        assert meta["gpus"] == [4, 5, 6, 7]
        pid = int((workdir / "slots" / "auto" / "current" / "pid").read_text())
        assert node_gpus_of(gpu_state, shared_dir, pid) == {4, 5, 6, 7}
        status = fab("status", "--host", "auto", "--inventory", str(inv))
        assert "ready" in status.stdout and "(GPUs 4,5,6,7)" in status.stdout, status.stdout
    finally:
        stop_runs(inv)


def assert_both_ready(inv: Path) -> None:
    status = fab("status", "--host", "a,b", "--inventory", str(inv))
    rows = [ln.split() for ln in status.stdout.splitlines() if ln.startswith(("a ", "b "))]
    assert len(rows) == 2 and all(row[5] == "ready" for row in rows), status.stdout


def test_two_slots_serve_side_by_side_and_an_overlapping_third_is_refused(
    sshd: Sshd,
    tmp_path: Path,
    gpu_state: Path,
    shared_dir: Path,
    write_inventory: Callable[..., Path],
) -> None:
    workdir = tmp_path / "node"
    sets = {"a": [0, 1, 2, 3], "b": [4, 5, 6, 7], "c": [2, 3, 4, 5]}
    hosts = {n: gpu_host(sshd, workdir, gpu_state, n, slot=n) for n in sets}
    inv = write_inventory(hosts, {n: tp4(gpus=g) for n, g in sets.items()})
    try:
        both = fab("deploy", "--host", "a,b", "--inventory", str(inv), timeout_s=180)
        assert both.returncode == 0, both.stdout + both.stderr
        assert_both_ready(inv)
        for name in ("a", "b"):
            pid = int((workdir / "slots" / name / "current" / "pid").read_text())
            assert node_gpus_of(gpu_state, shared_dir, pid) == set(sets[name])

        third = fab("deploy", "--host", "c", "--inventory", str(inv))
        assert third.returncode == 6, third.stdout + third.stderr
        text = third.stdout + third.stderr
        assert "FAIL  slots" in text, text
        assert "GPUs 2,3 are used by slot a" in text and "GPUs 4,5 are used by slot b" in text
        assert not (workdir / "slots" / "c" / "current").exists()  # refused before launch
        assert_both_ready(inv)
    finally:
        stop_runs(inv)


def test_a_slot_keeps_its_own_run_lock_and_history(tmp_path: Path) -> None:
    """Pure: host entries of one workdir with their own `slot:` are separate slots."""
    from firedup.config.inventory import parse_inventory
    from firedup.node.slot import slot_mates

    inv = parse_inventory(
        {
            "hosts": {
                "a": {"address": "n", "workdir": "/srv/fd", "slot": "a", "deployment": "d"},
                "b": {"address": "n", "workdir": "/srv/fd", "slot": "b", "deployment": "d"},
                "plain": {"address": "n", "workdir": "/srv/fd", "deployment": "d"},
            },
            "deployments": {"d": {"engine": "sglang", "model": "/m"}},
        },
        tmp_path / "hosts.yaml",
    )
    assert inv.hosts["a"].workdir == "/srv/fd/slots/a" and inv.hosts["a"].slot_root == "/srv/fd"
    assert inv.hosts["plain"].workdir == "/srv/fd"
    assert slot_mates(inv.hosts.values()) == {"a": (), "b": (), "plain": ()}
    assert os.path.basename(inv.hosts["b"].workdir) == "b"


def test_place_names_the_hosts_and_gpus_that_could_take_it(
    sshd: Sshd,
    tmp_path: Path,
    gpu_state: Path,
    shared_dir: Path,
    busy_node: subprocess.Popen[bytes],
    other_user: str,
    write_inventory: Callable[..., Path],
) -> None:
    full = Path(tempfile.mkdtemp(prefix="firedup-gpu-full-", dir="/tmp"))
    full.chmod(0o1777)
    everything = hold_gpus(shared_dir, full, other_user, "0,1,2,3,4,5,6,7")
    try:
        hosts = {
            "half-busy": gpu_host(sshd, tmp_path / "n1", gpu_state, "tiny"),
            "all-busy": gpu_host(sshd, tmp_path / "n2", full, "tiny"),
        }
        inv = write_inventory(hosts, {"tiny": tp4()}, groups={"fleet": list(hosts)})
        out = fab("place", "--deployment", "tiny", "--host", "fleet", "--inventory", str(inv))
        assert out.returncode == 0, out.stdout + out.stderr
        rows = {ln.split()[0]: ln for ln in out.stdout.splitlines()[1:]}
        assert rows["half-busy"].split()[1:3] == ["yes", "4,5,6,7"], out.stdout
        assert "one NUMA node (1)" in rows["half-busy"]
        assert rows["all-busy"].split()[1] == "no", out.stdout
        assert f"pid {everything.pid}" in rows["all-busy"] and other_user in rows["all-busy"]

        data = json.loads(
            fab("place", "--deployment", "tiny", "--json", "--inventory", str(inv)).stdout
        )
        fits = {h["host"]: h for h in data["hosts"]}
        assert fits["half-busy"]["gpus"] == [4, 5, 6, 7] and not fits["all-busy"]["fits"]
    finally:
        stop_process(everything)
        shutil.rmtree(full, ignore_errors=True)


@pytest.fixture
def discover_node(tmp_path: Path, gpu_state: Path, shared_dir: Path) -> Iterator[Sshd]:
    """A node whose login environment finds the simulated engines (as a module or conda
    setup in ~/.bashrc would), with a model under ~/models."""
    env = {
        "PYTHONPATH": str(shared_dir / "python"),
        "PATH": f"{shared_dir / 'bin'}:/usr/local/bin:/usr/bin:/bin",
        "FIREDUP_SIM_STATE": str(gpu_state),
        "FIREDUP_SIM_SPEED": "1",
    }
    proc, node = start_sshd(tmp_path / "discover-sshd", session_env=env)
    shutil.copytree(shared_dir / "models" / "tiny-llama", node.root / "home" / "models" / "tiny")
    try:
        yield node
    finally:
        stop_process(proc)


def foreign_server(shared: Path, state: Path, user: str, port: int) -> subprocess.Popen[bytes]:
    """Another user's SGLang server on GPU 0, started by hand (no firedup run)."""
    env = {
        "PYTHONPATH": str(shared / "python"),
        "PATH": f"{shared / 'bin'}:/usr/bin:/bin",
        "FIREDUP_SIM_STATE": str(state),
        "FIREDUP_SIM_SPEED": "4",
    }
    model = str(shared / "models" / "tiny-llama")
    argv = ["sglang.launch_server", "--model-path", model, "--port", str(port)]
    return as_user(user, argv, env, stdout=subprocess.DEVNULL, start_new_session=True)


def test_discover_prints_an_entry_that_deploy_accepts_as_is(
    discover_node: Sshd, tmp_path: Path, gpu_state: Path, shared_dir: Path, other_user: str
) -> None:
    port = free_port()
    theirs = foreign_server(shared_dir, gpu_state, other_user, port)
    inv = tmp_path / "discovered.yaml"
    try:
        wait_until(lambda: listening(port), 30, "the other user's server to listen")
        found = fab(
            "discover", "--host", "127.0.0.1", "--port", str(discover_node.port),
            "--identity-file", str(discover_node.client_key),
            "--known-hosts", str(discover_node.known_hosts),
        )  # fmt: skip
        assert found.returncode == 0, found.stdout + found.stderr
        text = found.stdout
        assert "sglang 0.5.9" in text and "vllm 0.33.0" in text, text
        assert f"port {port}, not ours (user {other_user})" in text, text
        assert re.search(rf"GPU 0 NVIDIA H200 .*user {other_user}", text), text
        inv.write_text(text)
        data = yaml.safe_load(text)
        (name,) = data["hosts"]
        deployment = data["deployments"][data["hosts"][name]["deployment"]]
        assert deployment["gpus"] == "auto" and deployment["port"] != port
        assert deployment["model"].endswith("/home/models/tiny")

        deploy = fab("deploy", "--host", name, "--inventory", str(inv), timeout_s=150)
        assert deploy.returncode == 0, deploy.stdout + deploy.stderr
        again = fab(
            "discover", "--host", "127.0.0.1", "--port", str(discover_node.port),
            "--identity-file", str(discover_node.client_key),
            "--known-hosts", str(discover_node.known_hosts),
        )  # fmt: skip
        assert f"ours: host {name}" in again.stdout, again.stdout
    finally:
        os.killpg(theirs.pid, signal.SIGTERM)
        theirs.wait(20)
        if inv.exists():
            stop_runs(inv)


def listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_start_without_preflight_still_chooses_auto_gpus_on_the_node(
    sshd: Sshd,
    tmp_path: Path,
    gpu_state: Path,
    busy_node: subprocess.Popen[bytes],
    write_inventory: Callable[..., Path],
) -> None:
    workdir = tmp_path / "node"
    hosts = {"auto": gpu_host(sshd, workdir, gpu_state, "auto")}
    inv = write_inventory(hosts, {"auto": tp4(gpus="auto")})
    try:
        started = fab("start", "--host", "auto", "--inventory", str(inv))
        assert started.returncode == 0, started.stdout + started.stderr
        assert meta_of(workdir)["gpus"] == [4, 5, 6, 7]
        launch = (workdir / "current" / "launch.sh").read_text()
        assert "CUDA_VISIBLE_DEVICES=4,5,6,7" in launch
    finally:
        stop_runs(inv)


def test_two_overlapping_slots_deployed_at_once_never_both_run(
    sshd: Sshd, tmp_path: Path, gpu_state: Path, write_inventory: Callable[..., Path]
) -> None:
    """Both preflights may pass at the same moment: the run that started later gives way."""
    workdir = tmp_path / "node"
    sets = {"a": [0, 1, 2, 3], "c": [2, 3, 4, 5]}
    hosts = {n: gpu_host(sshd, workdir, gpu_state, n, slot=n) for n in sets}
    inv = write_inventory(hosts, {n: tp4(gpus=g) for n, g in sets.items()})
    try:
        both = fab("deploy", "--host", "a,c", "--inventory", str(inv), timeout_s=180)
        text = both.stdout + both.stderr
        assert both.returncode in (6, 7), text
        status = fab("status", "--host", "a,c", "--inventory", str(inv))
        rows = {ln.split()[0]: ln.split() for ln in status.stdout.splitlines()[1:3]}
        ready = [n for n, row in rows.items() if len(row) > 5 and row[5] == "ready"]
        assert len(ready) == 1, status.stdout
        loser = "c" if ready == ["a"] else "a"
        assert f"1 of 2 hosts failed: {loser}" in text, text
        # Refused by its preflight (the other had started) or after its start (both passed
        # at once: "taken a moment earlier"); either way the winner is named to the loser.
        again = fab("preflight", "--host", loser, "--inventory", str(inv))
        assert again.returncode == 6 and f"used by slot {ready[0]} (host {ready[0]}" in (
            again.stdout
        ), again.stdout
    finally:
        stop_runs(inv)
