"""Preflight checks, pure, on facts recorded from the simulated story node."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from firedup.config.deployment import Deployment
from firedup.patching import Mode, PatchOutcome, PatchReport, PatchStatus
from firedup.preflight.checks import Situation, run_checks
from firedup.preflight.context import derived_context_length
from firedup.preflight.facts import parse_facts
from firedup.preflight.model import Outcome

FACTS = json.loads(
    (Path(__file__).parent.parent / "fixtures" / "preflight" / "story-node.json").read_text()
)
STORY: dict[str, Any] = {
    "name": "story",
    "engine": "sglang",
    "model": "/data/models/kimi-k25",
    "port": 30123,
    "tp": 8,
    "context_length": 262144,
    "speculative": {"algorithm": "EAGLE3", "draft_model": "/data/models/kimi-k25-eagle3"},
}
HOOKS = "kimi-k25-eagle3-hooks"


def judge(
    deployment: dict[str, Any] | None = None,
    facts: dict[str, Any] | None = None,
    patch: PatchStatus | None = None,
    our_sid: int | None = None,
    restart: bool = False,
) -> dict[str, tuple[Outcome, str, str | None]]:
    d = Deployment.model_validate({**STORY, **(deployment or {})})
    patches = None
    if patch is not None:
        patches = PatchReport("n", Mode.CHECK, (PatchOutcome(HOOKS, patch, "sglang", "0.5.9"),))
    s = Situation(
        parse_facts(facts or FACTS), d, patches, our_sid, "r1" if our_sid else None, restart
    )
    return {c.name: (c.outcome, c.detail, c.hint) for c in run_checks(s)}


def test_story_v3_fails_on_context_and_hooks() -> None:
    result = judge()
    assert result["context length"][0] is Outcome.FAIL
    assert "262144 > the draft's 131072" in result["context length"][1]
    assert "draft_context: extend" in str(result["context length"][2])
    assert "context_length' to 131072" in str(result["context length"][2])
    assert result["model hooks"][0] is Outcome.FAIL
    assert HOOKS in str(result["model hooks"][2])


def test_story_v4_passes_context_fails_hooks() -> None:
    result = judge({"draft_context": "extend"})
    assert result["context length"][0] is Outcome.PASS
    assert result["model hooks"][0] is Outcome.FAIL


def test_raw_env_counts_as_the_opt_in() -> None:
    result = judge({"env": {"SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN": "true"}})
    assert result["context length"][0] is Outcome.PASS


@pytest.mark.parametrize(
    ("status", "outcome"),
    [
        (PatchStatus.WOULD_APPLY, Outcome.PASS),
        (PatchStatus.ALREADY_APPLIED, Outcome.PASS),
        (PatchStatus.CONFLICTS, Outcome.FAIL),
    ],
)
def test_story_v5_hooks_follow_the_patch(status: PatchStatus, outcome: Outcome) -> None:
    result = judge({"draft_context": "extend", "patches": [HOOKS]}, patch=status)
    assert result["model hooks"][0] is outcome
    bad = {name for name, (o, _, _) in result.items() if o is Outcome.FAIL}
    assert bad == (set() if outcome is Outcome.PASS else {"model hooks", "patches"})


def test_fixed_versions_and_other_algorithms_have_no_gap() -> None:
    newer = copy.deepcopy(FACTS)
    newer["engine"]["version"] = "0.5.10"
    assert judge(facts=newer)["model hooks"][0] is Outcome.PASS
    assert judge({"speculative": {"algorithm": "NGRAM"}})["model hooks"][0] is Outcome.PASS


def test_vllm_needs_no_variable() -> None:
    result = judge({"engine": "vllm"})
    assert result["context length"][0] is Outcome.PASS
    assert "vLLM adjusts" in result["context length"][1]


def test_port_held_by_others_by_us_and_with_restart() -> None:
    facts = copy.deepcopy(FACTS)
    facts["port"]["listeners"] = [{"local": "0.0.0.0:30123", "pids": [77], "names": ["nginx"]}]
    assert judge(facts=facts)["port"][0] is Outcome.FAIL
    assert "nginx pid 77" in judge(facts=facts)["port"][1]
    facts["processes"] = [{"pid": 77, "sid": 70, "cmdline": "python3 -m sglang.launch_server"}]
    ours = judge(facts=facts, our_sid=70)
    assert ours["port"][0] is Outcome.FAIL and "--restart" in str(ours["port"][2])
    assert judge(facts=facts, our_sid=70, restart=True)["port"][0] is Outcome.PASS
    assert ours["leftovers"][0] is Outcome.PASS  # our own run is not a leftover


def test_leftovers_holding_gpu_memory_fail() -> None:
    facts = copy.deepcopy(FACTS)
    facts["processes"] = [{"pid": 5, "sid": 5, "cmdline": "sglang::scheduler_TP0"}]
    assert judge(facts=facts)["leftovers"][0] is Outcome.WARN
    facts["gpus"]["apps"] = [{"pid": 5, "name": "sglang::scheduler_TP0", "used_mib": 70000.0}]
    assert judge(facts=facts)["leftovers"][0] is Outcome.FAIL


def test_gpu_count_memory_and_driver() -> None:
    assert judge({"tp": 16})["gpus"][0] is Outcome.FAIL
    busy = copy.deepcopy(FACTS)
    busy["gpus"]["gpus"][3].update(used_mib=100000.0, free_mib=43771.0)
    assert judge({"mem_fraction": 0.9}, facts=busy)["gpus"][0] is Outcome.FAIL
    assert judge(facts=busy)["gpus"][0] is Outcome.WARN
    none = copy.deepcopy(FACTS)
    none["gpus"] = {"available": False, "error": "nvidia-smi not found on PATH"}
    assert judge(facts=none)["gpus"][0] is Outcome.FAIL


def test_missing_tools_models_engine_and_disk() -> None:
    facts = copy.deepcopy(FACTS)
    facts["tools"]["ss"] = None
    facts["engine"] = {
        "importable": False,
        "error": "ModuleNotFoundError: No module named 'sglang'",
    }
    facts["models"]["/data/models/kimi-k25-eagle3"] = {"path": "x", "exists": False}
    facts["disk"]["free_bytes"] = 100
    result = judge(facts=facts)
    for name in ("tools", "engine", "model paths", "disk"):
        assert result[name][0] is Outcome.FAIL, name


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({"max_position_embeddings": 131072}, 131072),
        (
            {"text_config": {"max_position_embeddings": 262144}, "max_position_embeddings": 8},
            262144,
        ),
        (
            {"max_position_embeddings": 4096, "rope_scaling": {"factor": 4.0, "type": "linear"}},
            16384,
        ),
        (
            {
                "max_position_embeddings": 262144,
                "rope_scaling": {"factor": 64, "original_max_position_embeddings": 4096},
            },
            262144,
        ),
        (
            {
                "max_position_embeddings": 131072,
                "rope_scaling": {"factor": 8, "rope_type": "llama3"},
            },
            131072,
        ),
        ({"seq_length": 32768, "max_position_embeddings": 4096}, 32768),
        ({}, 2048),
    ],
)
def test_context_is_derived_as_sglang_does(config: dict[str, Any], expected: int) -> None:
    assert derived_context_length(config)[0] == expected
