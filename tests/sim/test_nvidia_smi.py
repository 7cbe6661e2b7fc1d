"""The stand-in nvidia-smi reports the memory held by live simulator processes only."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from tests.sim.simhelp import REPO

SMI = str(REPO / "sim" / "bin" / "nvidia-smi")
HOLD = (
    "import sys, time\n"
    "from firedup_sim import gpustate\n"
    "h = gpustate.Holder(3, 'sglang::scheduler_TP3'); h.add_gb(10.0)\n"
    "print('held', flush=True); time.sleep(60)\n"
)


def _env(state: Path) -> dict[str, str]:
    return {**os.environ, "FIREDUP_SIM_STATE": str(state), "PYTHONPATH": str(REPO / "sim/python")}


def _smi(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, SMI, *args], env=env, capture_output=True, text=True)


def test_memory_follows_live_processes(tmp_path: Path) -> None:
    env = _env(tmp_path)
    holder = subprocess.Popen([sys.executable, "-c", HOLD], env=env, stdout=subprocess.PIPE)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
        gpus = _smi(
            env,
            "--query-gpu=index,name,memory.total,memory.used,memory.free",
            "--format=csv,noheader,nounits",
        ).stdout.splitlines()
        assert len(gpus) == 8
        assert gpus[0] == "0, NVIDIA H200, 143771, 0, 143771"
        assert gpus[3] == "3, NVIDIA H200, 143771, 10770, 133001"  # 530 MiB context + 10 GiB
        apps = _smi(
            env,
            "--query-compute-apps=pid,process_name,used_memory",
            "--format=csv,noheader,nounits",
        ).stdout
        assert apps == f"{holder.pid}, sglang::scheduler_TP3, 10770\n"
        with_units = _smi(env, "--query-compute-apps=pid,used_memory", "--format=csv").stdout
        assert with_units.splitlines() == ["pid, used_memory [MiB]", f"{holder.pid}, 10770 MiB"]
        assert "sglang::scheduler_TP3" in _smi(env).stdout
    finally:
        holder.kill()
        holder.wait()
    # SIGKILLed: no cleanup ran, yet the memory is free because its pid is gone.
    apps = _smi(
        env, "--query-compute-apps=pid,process_name,used_memory", "--format=csv,noheader,nounits"
    )
    assert apps.stdout == ""
    assert not list(tmp_path.glob("gpu*.json"))


def test_unknown_field_is_rejected(tmp_path: Path) -> None:
    result = _smi(_env(tmp_path), "--query-gpu=index,bogus", "--format=csv")
    assert result.returncode == 2
    assert 'Field "bogus" is not a valid field to query.' in result.stdout


def test_a_killed_rank_not_yet_reaped_holds_no_memory(tmp_path: Path) -> None:
    """Found when faster deploys made the story's third launch OOM: the second launch's ranks,
    SIGKILLed by their dying parent, were zombies nobody had reaped yet, and their memory still
    counted. A driver frees a process's memory as it exits, zombie or not."""
    env = _env(tmp_path)
    holder = subprocess.Popen([sys.executable, "-c", HOLD], env=env, stdout=subprocess.PIPE)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
        os.kill(holder.pid, 9)  # not waited for: a zombie until the finally below
        stat = Path(f"/proc/{holder.pid}/stat")
        deadline = time.monotonic() + 5
        while stat.read_text().rsplit(")", 1)[1].split()[0] != "Z":
            assert time.monotonic() < deadline, "the holder never became a zombie"
            time.sleep(0.01)
        apps = _smi(
            env, "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"
        ).stdout
        assert apps == ""
    finally:
        holder.kill()
        holder.wait()


def test_cuda_visible_devices_maps_ordinals_to_node_gpus(tmp_path: Path) -> None:
    """A rank's CUDA device 1 under CUDA_VISIBLE_DEVICES=4,6 is the node's GPU 6, as nvidia-smi
    (which ignores the variable) shows it; an ordinal past the list fails as CUDA does."""
    env = {**_env(tmp_path), "CUDA_VISIBLE_DEVICES": "4,6"}
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD.replace("Holder(3,", "Holder(1,")],
        env=env,
        stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
        apps = _smi(env, "--query-compute-apps=pid,gpu_uuid", "--format=csv,noheader")
        assert apps.stdout.strip().endswith("000000000006"), apps.stdout
    finally:
        holder.kill()
        holder.wait()
    bad = subprocess.run(
        [sys.executable, "-c", HOLD.replace("Holder(3,", "Holder(2,")],
        env=env,
        capture_output=True,
        text=True,
    )
    assert bad.returncode != 0 and "invalid device ordinal" in bad.stderr


def test_topology_matrix_reads_as_the_real_one(tmp_path: Path) -> None:
    from firedup.preflight.sharing import parse_topology

    nvswitch = _smi(_env(tmp_path), "topo", "-m").stdout
    assert nvswitch.startswith("\tGPU0\tGPU1") and "\t\tN/A\n" in nvswitch
    assert "Legend:" in nvswitch and "NV#  = Connection traversing" in nvswitch
    topo = parse_topology(nvswitch)
    assert topo.link(0, 5) == "NV18" and topo.numa[3] == "0" and topo.numa[4] == "1"
    pcie = parse_topology(
        _smi({**_env(tmp_path), "FIREDUP_SIM_TOPOLOGY": "pcie"}, "topo", "-m").stdout
    )
    assert (pcie.link(0, 1), pcie.link(0, 2), pcie.link(0, 4)) == ("PIX", "NODE", "SYS")
    assert _smi(_env(tmp_path), "topo", "-p2p", "r").returncode == 2


def test_another_users_holder_is_listed_with_everyone_elses(tmp_path: Path) -> None:
    """`firedup_sim.hold`: a job holding memory on chosen node GPUs (the tests run it as
    another account); nvidia-smi lists it per GPU under its pid."""
    env = _env(tmp_path)
    hold = subprocess.Popen(
        [sys.executable, "-m", "firedup_sim.hold", "--gpus", "0,3", "--mib", "2048"],
        env=env,
        stdout=subprocess.PIPE,
    )
    try:
        assert hold.stdout is not None and hold.stdout.readline().startswith(b"holding")
        apps = _smi(env, "--query-compute-apps=pid,used_memory,gpu_uuid", "--format=csv,noheader")
        rows = [r.split(", ") for r in apps.stdout.splitlines()]
        assert [(int(r[0]), r[1], r[2][-1]) for r in rows] == [
            (hold.pid, "2048 MiB", "0"),
            (hold.pid, "2048 MiB", "3"),
        ]
    finally:
        hold.terminate()
        hold.wait(10)
    assert _smi(env, "--query-compute-apps=pid", "--format=csv,noheader").stdout == ""
