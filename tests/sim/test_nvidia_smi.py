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
