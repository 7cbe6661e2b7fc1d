"""Each simulated release against the real one, checked with the conformance data (issue 14).

The flags are read off the simulated node the way preflight reads a real node (the same
argscan snippet, run by the node's python); the logs come from real simulated launches.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest

from firedup.engine import Engine
from firedup.preflight.facts import _snippet
from firedup.preflight.flagcheck import judge, problems, script_flags
from firedup.releases.conformance import LITERALS, TRACKED_CHOICES, release
from firedup.releases.table import judge as judge_release
from tests.sim.simhelp import FAST, REPO, scenarios

SIM_PYTHON = REPO / "sim" / "python"
DIALECTS = [("sglang", "0.5.9"), ("sglang", "0.5.10"), ("sglang", "0.5.23"), ("vllm", "0.33.0")]
# Printed by every plain start of the release that has them (the rest vary by path).
ALWAYS = (
    "Init torch distributed begin",
    "Load weight begin",
    "KV Cache is allocated",
    "Memory pool end",
    "The server is fired up and ready to roll",
)


def _env(version: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(SIM_PYTHON), "FIREDUP_SIM_SGLANG_VERSION": version}


def sim_flags(engine: str, version: str) -> dict[str, Any]:
    """What preflight's snippet reads off the simulated node for this release."""
    args = json.dumps({"engine": engine, "models": [], "port": 1, "workdir": "/tmp"})
    out = subprocess.run(
        [sys.executable, "-c", _snippet(), args],
        env=_env(version),
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    facts = json.loads(out.splitlines()[-1])["engine"]
    assert facts["version"] == version
    return dict(facts["args"]["flags"])


@pytest.mark.parametrize(("engine", "version"), DIALECTS)
def test_the_simulated_flags_are_the_real_releases(engine: str, version: str) -> None:
    sim = sim_flags(engine, version)
    real = release(engine, version)
    assert real.checked == version
    flags = {f: None for f in real.flags}
    refused = [f for f in sim if f.startswith("-") and judge(f, flags, Engine(engine))]
    assert refused == []  # it accepts nothing the real one refuses
    for flag in TRACKED_CHOICES:
        if real.accepts(flag):
            assert sim.get(flag) == real.choices(flag), flag
    # Every launch firedup renders for this release passes the simulated parser too.
    verdict = judge_release(engine, version)
    for feature, scripts in verdict.rendered.items():
        for script in scripts:
            assert problems(script_flags(script), sim, Engine(engine)) == [], feature


def test_sglang_0_5_23_calls_the_old_graph_flag_ambiguous_as_the_real_one_does() -> None:
    sim = sim_flags("sglang", "0.5.23")
    real = {f: None for f in release("sglang", "0.5.23").flags}
    words = judge("--cuda-graph-max-bs", sim, Engine.SGLANG)
    assert words == judge("--cuda-graph-max-bs", real, Engine.SGLANG)
    assert words and words.startswith("ambiguous option")


@pytest.mark.parametrize(
    ("version", "argv", "message"),
    [
        (
            "0.5.23",
            ["--cuda-graph-max-bs", "8"],
            "error: ambiguous option: --cuda-graph-max-bs could match "
            "--cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill",
        ),
        ("0.5.9", ["--cuda-graph-max-bs-decode", "8"], "error: unrecognized arguments:"),
        (
            "0.5.9",
            ["--speculative-algorithm", "DFLASH"],
            "error: argument --speculative-algorithm: invalid choice: 'DFLASH'",
        ),
    ],
)
def test_the_simulated_parser_refuses_with_argparse_words(
    version: str, argv: list[str], message: str
) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "sglang.launch_server", "--model-path", "/m", *argv],
        env=_env(version),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert message in proc.stderr


@pytest.mark.parametrize("version", ["0.5.9", "0.5.10", "0.5.23"])
def test_the_simulated_log_has_the_real_releases_lines(
    version: str, launch: Callable[..., Any]
) -> None:
    scenario = scenarios.Scenario(
        f"tiny-{version}",
        "sglang",
        (*scenarios.TINY, "--cuda-graph-max-bs" + ("-decode" if version == "0.5.23" else ""), "8"),
        "ready",
        env={"FIREDUP_SIM_SGLANG_VERSION": version},
    )
    run = launch(scenario, FAST)
    assert run.wait_text(scenarios.FIRED, 60), run.log()
    log = run.log()
    has = release("sglang", version).facts["literals"]
    printed = {lit.needle for lit in LITERALS if lit.engine == "sglang" and lit.needle in log}
    assert sorted(printed - set(has)) == []  # prints nothing the release does not have
    for needle in ALWAYS:
        assert (needle in log) == (needle in has), needle
    banner = log.splitlines()[0]
    assert ("server_args={" in banner) == (version == "0.5.23")


def test_the_simulated_vllm_log_has_the_real_releases_lines(launch: Callable[..., Any]) -> None:
    scenario = scenarios.Scenario("tiny-vllm", "vllm", ("sim/models/tiny-llama",), "ready")
    run = launch(scenario, FAST)
    assert run.wait_text("Application startup complete.", 60), run.log()
    log = run.log()
    has = release("vllm", "0.33.0").facts["literals"]
    printed = {lit.needle for lit in LITERALS if lit.engine == "vllm" and lit.needle in log}
    assert sorted(printed - set(has)) == []
    assert {"Starting to load model", "Available KV cache memory", "GPU KV cache size"} <= printed
    assert "Starting vLLM server on" in printed and "Starting vLLM API server" not in log
