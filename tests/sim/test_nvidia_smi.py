"""The stand-in nvidia-smi reports the memory held by live simulator processes only."""

from __future__ import annotations

import os
import subprocess
import sys
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
