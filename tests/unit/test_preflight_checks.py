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
    assert "long_context: allow" in str(result["context length"][2])
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


def _vllm_facts(config: dict[str, Any], tokenizer_max: float | None = None) -> dict[str, Any]:
    facts = copy.deepcopy(FACTS)
    facts["models"] = {
        "/m": {
            "path": "/m",
            "exists": True,
            "config": config,
            "tokenizer_max_length": tokenizer_max,
        }
    }
    return facts


VLLM_TINY = {"engine": "vllm", "model": "/m", "speculative": None, "context_length": 4096}


def test_vllm_refuses_a_context_above_the_models_naming_its_env_var() -> None:
    # Before: PASS "context_length 4096 > the target's 2048 (max_position_embeddings): vLLM
    # adjusts the draft itself", for a deployment with no draft.
    got = judge(VLLM_TINY, _vllm_facts({"max_position_embeddings": 2048}))["context length"]
    assert got[0] is Outcome.FAIL
    assert "context_length 4096 > the model's 2048 (max_position_embeddings)" in got[1]
    assert "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1" in got[1]
    assert "long_context: allow" in str(got[2]) and "'context_length' to 2048" in str(got[2])


@pytest.mark.parametrize(
    ("config", "tokenizer_max", "outcome"),
    [
        ({"max_position_embeddings": 4096}, None, Outcome.PASS),
        ({"max_position_embeddings": 4096}, 2048, Outcome.FAIL),  # the tokenizer caps it
        (
            {"max_position_embeddings": 2048, "rope_scaling": {"type": "linear", "factor": 2}},
            None,
            Outcome.PASS,
        ),
        (
            {"max_position_embeddings": 2048, "rope_scaling": {"rope_type": "yarn", "factor": 4}},
            None,
            Outcome.FAIL,
        ),
        ({"max_position_embeddings": 2048, "model_max_length": 8192}, None, Outcome.PASS),
        ({"text_config": {"max_position_embeddings": 2048}}, None, Outcome.FAIL),
    ],
)
def test_vllm_derives_the_length_as_vllm_0_32_does(
    config: dict[str, Any], tokenizer_max: float | None, outcome: Outcome
) -> None:
    assert judge(VLLM_TINY, _vllm_facts(config, tokenizer_max))["context length"][0] is outcome


@pytest.mark.parametrize(
    "knob",
    [
        {"long_context": "allow"},
        {"env": {"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"}},
        {"draft_context": "extend"},
    ],
)
def test_the_long_context_knob_lets_vllm_run_it(knob: dict[str, Any]) -> None:
    got = judge({**VLLM_TINY, **knob}, _vllm_facts({"max_position_embeddings": 2048}))
    assert got["context length"][0] is Outcome.PASS
    assert "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 is exported" in got["context length"][1]
    old = "draft_context" in knob
    assert ("write 'long_context: allow'" in str(got["context length"][2])) is old


def test_the_sglang_env_var_does_not_open_vllm() -> None:
    knob = {"env": {"SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN": "1"}}
    got = judge({**VLLM_TINY, **knob}, _vllm_facts({"max_position_embeddings": 2048}))
    assert got["context length"][0] is Outcome.FAIL
